#include "titan/nn/decoder.h"

#include "titan/ops/matmul/linear.h"
#include "titan/ops/softmax_xent/softmax_xent.h"

namespace titan::nn {

int64_t DecoderConfig::num_params() const {
  const int64_t q = num_heads * head_dim, kv = num_kv_heads * head_dim;
  int64_t attn = dim * q + 2 * dim * kv + q * dim;
  if (attention_bias || qkv_bias) attn += q + 2 * kv;
  if (attention_bias) attn += dim;
  if (qk_norm) attn += 2 * head_dim;
  const int64_t mlp = 3 * dim * hidden_dim + (mlp_bias ? 2 * hidden_dim + dim : 0);
  const int64_t block = attn + mlp + 2 * dim;
  return vocab_size * dim * (tie_embeddings ? 1 : 2) + num_layers * block + dim;
}

static TransformerBlockConfig block_config(const DecoderConfig& c) {
  TransformerBlockConfig b;
  b.attention = {c.dim, c.num_heads, c.num_kv_heads, c.head_dim, c.attention_bias || c.qkv_bias,
                 c.qk_norm, c.norm_eps, c.attention_bias};
  b.feed_forward = {c.dim, c.hidden_dim, c.mlp_bias};
  b.norm_eps = c.norm_eps;
  return b;
}

Decoder::Decoder(const DecoderConfig& config)
    : tok_embeddings({(config.validate(), config.vocab_size), config.dim}, "tok_embeddings"),
      norm({config.dim, config.norm_eps}, "norm"),
      config_(config) {
  for (int64_t i = 0; i < config.num_layers; ++i) {
    layers.push_back(std::make_unique<TransformerBlock>(block_config(config), str("layers.", i)));
  }
  if (!config.tie_embeddings) {
    output = std::make_unique<Linear>(LinearConfig{config.dim, config.vocab_size, false}, "output");
  }
}

ParameterList Decoder::parameters() {
  ParameterList out;
  tok_embeddings.collect(out);
  for (auto& layer : layers) layer->collect(out);
  norm.collect(out);
  if (output) output->collect(out);
  return out;
}

void Decoder::zero_grad() {
  for (Parameter* p : parameters()) p->grad.zero_();
}

StepContext Decoder::make_context(const Tensor& ids_BT) const {
  TITAN_CHECK(ids_BT.ndim() == 2, "[model] input ids: expected [batch, seq], got ", ids_BT.describe());
  StepContext ctx;
  ctx.batch = ids_BT.size(0);
  ctx.seq = ids_BT.size(1);
  ctx.positions_N = Tensor::empty({ctx.batch * ctx.seq}, DType::i64);
  int64_t* pos = ctx.positions_N.data<int64_t>();
  for (int64_t b = 0; b < ctx.batch; ++b) {
    for (int64_t t = 0; t < ctx.seq; ++t) pos[b * ctx.seq + t] = t;
  }
  ctx.rope = ops::rope_tables({config_.rope_theta}, ctx.positions_N, config_.head_dim);
  return ctx;
}

Tensor Decoder::forward_hidden(const StepContext& ctx, const Tensor& ids_BT) {
  Tensor h_ND = tok_embeddings.forward(ids_BT);
  for (auto& layer : layers) h_ND = layer->forward(ctx, h_ND);
  return norm.forward(h_ND);
}

LossResult Decoder::forward_backward(const Tensor& ids_BT, const Tensor& targets_BT,
                                     float grad_scale) {
  TITAN_CHECK(targets_BT.shape() == ids_BT.shape(), "[model] targets ", targets_BT.describe(),
              " must have the shape of the input ids ", ids_BT.describe());
  const StepContext ctx = make_context(ids_BT);
  const Tensor hn_ND = forward_hidden(ctx, ids_BT);

  LossResult result;
  result.num_targets = ops::count_targets(targets_BT);
  if (grad_scale == 0.0f && result.num_targets > 0) grad_scale = 1.0f / static_cast<float>(result.num_targets);
  Tensor dhn_ND = Tensor::empty(hn_ND.shape());
  const ops::LmHeadXentResult xent =
      ops::lm_head_xent({}, hn_ND, head_weight().value, targets_BT, grad_scale, dhn_ND, head_weight().grad);
  result.loss_sum = xent.loss_sum;
  result.loss = xent.num_targets > 0 ? xent.loss_sum / static_cast<double>(xent.num_targets) : 0.0;

  Tensor dh_ND = norm.backward(dhn_ND);
  for (size_t i = layers.size(); i-- > 0;) dh_ND = layers[i]->backward(ctx, dh_ND);
  tok_embeddings.backward(dh_ND);
  return result;
}

LossResult Decoder::forward_loss(const Tensor& ids_BT, const Tensor& targets_BT) {
  const StepContext ctx = make_context(ids_BT);
  const Tensor hn_ND = forward_hidden(ctx, ids_BT);
  release();
  Tensor no_grad;
  const ops::LmHeadXentResult xent =
      ops::lm_head_xent({}, hn_ND, head_weight().value, targets_BT, 1.0f, no_grad, no_grad);
  LossResult result{0.0, xent.loss_sum, xent.num_targets};
  if (xent.num_targets > 0) result.loss = xent.loss_sum / static_cast<double>(xent.num_targets);
  return result;
}

void Decoder::release() {
  for (auto& layer : layers) layer->release();
  norm.release();
  tok_embeddings.release();
}

Tensor Decoder::forward_logits(const Tensor& ids_BT) {
  const StepContext ctx = make_context(ids_BT);
  const Tensor hn_ND = forward_hidden(ctx, ids_BT);
  release();
  Tensor logits_NV = Tensor::empty({ctx.batch * ctx.seq, config_.vocab_size});
  ops::linear_forward(hn_ND, head_weight().value, Tensor(), logits_NV);
  return logits_NV.reshape({ctx.batch, ctx.seq, config_.vocab_size});
}

}  // namespace titan::nn
