#include "titan/nn/decoder.h"

#include <algorithm>
#include <cmath>

#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/matmul/linear.h"
#include "titan/ops/positions/positions.h"
#include "titan/ops/rows/rows.h"
#include "titan/ops/softmax_xent/softmax_xent.h"

namespace titan::nn {

// experts_counted: num_experts for the stored parameters, top_k for one token's active share.
static int64_t count_params(const DecoderConfig& c, int64_t experts_counted) {
  const int64_t dense_mlp = 3 * c.dim * c.hidden_dim + (c.mlp_bias ? 2 * c.hidden_dim + c.dim : 0);
  const int64_t moe_mlp = c.num_experts * c.dim + experts_counted * 3 * c.dim * c.moe_hidden_dim;
  const int64_t moe_layers = c.num_moe_layers(), linear = c.num_linear_attention_layers();
  const auto attention = static_cast<int64_t>(static_cast<double>(c.num_layers - linear) * c.full_attention_params() +
                                              static_cast<double>(linear) * c.linear_attention_params());
  return c.vocab_size * c.dim * (c.tie_embeddings ? 1 : 2) + attention + (c.num_layers - moe_layers) * dense_mlp +
         moe_layers * moe_mlp + c.dim;
}

int64_t DecoderConfig::num_params() const { return count_params(*this, num_experts); }
int64_t DecoderConfig::num_active_params() const { return count_params(*this, num_experts_per_tok); }

Decoder::Decoder(const DecoderConfig& config) : Decoder(config, decoder_config_tree((config.validate(), config))) {}

Decoder::Decoder(const DecoderConfig& config, const ConfigTree& tree) : config_(config) {
  config.validate();
  check_decoder_tree(config, tree);
  const ModuleRegistry& registry = module_registry();
  for (const auto& [path, node] : tree) {
    const std::string origin = registry.origin(node->type_name());
    if (!origin.empty() && origin != "built-in") plugin_nodes_.push_back(path);
    // A plugin's RoPE node sees only theta (RopeConfig): it would compute unscaled tables.
    TITAN_CHECK(config.rope_scaling.type == ops::RopeType::default_ || origin.empty() || origin == "built-in" ||
                    !path.ends_with(".attention.rope"),
                "[model] ", path, ": the override's RoPE (", node->type_name(), ") cannot apply the model's '",
                ops::rope_type_name(config.rope_scaling.type), "' RoPE scaling (it sees only theta). HINT: drop the "
                "override for this model");
  }
  const ModuleBuild root(registry, tree, "model");
  tok_embeddings = root.child<EmbeddingModule>("tok_embeddings");
  for (int64_t i = 0; i < config.num_layers; ++i) {
    layers.push_back(std::make_unique<TransformerBlock>(ModuleBuild(registry, tree, str("model.layers.", i))));
  }
  norm = root.child<RmsNormModule>("norm");
  output = root.child<HeadModule>("output");
  if (config.tie_embeddings) output->tie(tok_embeddings->table());
}

void Decoder::check_shapes(int64_t batch, int64_t seq) const {
  if (tok_embeddings) tok_embeddings->check(batch, seq);
  for (const auto& layer : layers) layer->check(batch, seq);
  if (norm) norm->check(batch, seq);
  if (output) output->check(batch, seq);
}

ParameterList Decoder::parameters() {
  ParameterList out;
  if (tok_embeddings) tok_embeddings->collect(out);
  for (auto& layer : layers) layer->collect(out);
  if (norm) norm->collect(out);
  if (output) output->collect(out);
  return out;
}

void Decoder::keep_pipeline_part(const std::vector<int64_t>& layer_ids, bool first, bool last) {
  TITAN_CHECK(!config_.tie_embeddings || (first && last), "[model] a pipeline stage cannot hold a tied head "
              "without the embedding (internal: the trainer refuses tie_embeddings with pipeline parallelism)");
  std::vector<std::unique_ptr<TransformerBlock>> kept;
  std::vector<Recompute> recompute;
  for (int64_t id : layer_ids) {
    TITAN_CHECK(id >= 0 && id < static_cast<int64_t>(layers.size()) && layers[static_cast<size_t>(id)],
                "[model] pipeline part: layer ", id, " is not in this decoder");
    kept.push_back(std::move(layers[static_cast<size_t>(id)]));
    if (!recompute_.empty()) recompute.push_back(recompute_[static_cast<size_t>(id)]);
  }
  layers = std::move(kept);
  recompute_ = std::move(recompute);
  if (!first) tok_embeddings.reset();
  if (!last) {
    norm.reset();
    output.reset();
  }
}

// One execution path: the whole model is one stage (whole_span), a pipeline stage a part of it.
// The root unit's hooks bracket its parts one by one on a pipeline stage; the whole model keeps
// it gathered from the embedding to the end of the step (see UnitHooks).
Tensor Decoder::stage_forward(const Tensor& ids_BT, const Tensor& h_ND, const StageSpan& span, Activations& acts,
                              bool keep) {
  const bool whole = span.first && span.last;
  acts.ctx = make_context(ids_BT, acts.positions_BT, acts.sequence);
  acts.layers.resize(keep ? layers.size() : 1);
  Tensor x_ND = h_ND;
  if (span.first) {
    if (hooks_) hooks_->before_forward(UnitHooks::kRoot);
    x_ND = tok_embeddings->forward(ids_BT, acts.tok_embeddings);
    if (hooks_ && !whole) hooks_->after_forward(UnitHooks::kRoot);
    if (!keep) acts.tok_embeddings.reset();
    if (tp_) x_ND = tp_->leave(x_ND);  // each rank looked up its vocabulary rows
  }
  for (int64_t i = span.begin; i < span.end; ++i) {
    const auto u = static_cast<size_t>(i);
    if (hooks_) hooks_->before_forward(static_cast<int>(i));
    const Recompute recompute = keep && !recompute_.empty() ? recompute_[u] : Recompute::keep_all;
    x_ND = layers[u]->forward(acts.ctx, x_ND, acts.layers[keep ? u : 0], recompute, &acts.router);
    if (hooks_) hooks_->after_forward(static_cast<int>(i));
  }
  if (!keep) acts.layers.clear();
  if (!span.last) return x_ND;
  if (hooks_ && !whole) hooks_->before_forward(UnitHooks::kRoot);
  acts.head_input_ND = norm->forward(x_ND, acts.norm);
  if (hooks_ && !whole) hooks_->after_forward(UnitHooks::kRoot);
  return acts.head_input_ND;
}

LossResult Decoder::stage_loss(const Tensor& hn_ND, const Tensor& targets_BT, const StageSpan& span) {
  if (hooks_ && !(span.first && span.last)) hooks_->before_forward(UnitHooks::kRoot);
  Tensor no_dx, no_dw;
  // Under TP the vocabulary-parallel head (forward only: no dx, no dw) gives every rank the loss of
  // all N tokens, as the backward's does.
  const ops::LmHeadXentResult xent =
      tp_ ? tp_->head_xent(tp_->enter(hn_ND), head_weight().for_compute(), vocab_start_, targets_BT.reshape({-1}),
                           1.0f, no_dx, no_dw)
          : output->loss(hn_ND, targets_BT, 1.0f, no_dx);
  if (hooks_) hooks_->after_forward(UnitHooks::kRoot);
  LossResult result{0.0, xent.num_targets, loss_terms()};
  result.terms[0].sum = xent.loss_sum;
  result.loss = result.mean(1);
  return result;
}

std::vector<LossTerm> Decoder::loss_terms() const {
  std::vector<LossTerm> terms = {{std::string(kCrossEntropyTerm), 0.0, LossDenominator::targets, 1.0}};
  if (config_.load_balance == LoadBalance::aux_loss) {
    terms.push_back({std::string(kAuxLossTerm), 0.0, LossDenominator::forwards,
                     static_cast<double>(config_.router_aux_loss_coef)});
  }
  return terms;
}

Tensor Decoder::stage_backward(const Tensor& dh_ND, const Tensor& targets_BT, float grad_scale,
                               const StageSpan& span, Activations& acts, LossResult& loss, float forward_scale) {
  const bool whole = span.first && span.last;
  Tensor dx_ND = dh_ND;
  if (span.last) {
    const Tensor& hn_ND = acts.head_input_ND;
    Tensor dhn_ND;
    if (hooks_) hooks_->before_backward(UnitHooks::kRoot);  // before the fused head writes its gradient
    const ops::LmHeadXentResult xent = head_loss_backward(hn_ND, targets_BT, grad_scale, dhn_ND);
    loss = LossResult{0.0, xent.num_targets, loss_terms()};
    loss.terms[0].sum = xent.loss_sum;
    if (config_.load_balance == LoadBalance::aux_loss) add_aux_loss(acts, forward_scale, loss);
    loss.loss = loss.mean(1);
    acts.head_input_ND = Tensor();
    dx_ND = norm->backward(dhn_ND, acts.norm);
    if (hooks_ && !whole) hooks_->after_backward(UnitHooks::kRoot);
  }
  for (int64_t i = span.end; i-- > span.begin;) {
    const auto u = static_cast<size_t>(i);
    if (hooks_) hooks_->before_backward(static_cast<int>(i));
    dx_ND = layers[u]->backward(acts.ctx, dx_ND, acts.layers[u]);
    if (hooks_) hooks_->after_backward(static_cast<int>(i));
  }
  if (!span.first) return dx_ND;
  if (hooks_ && !whole) hooks_->before_backward(UnitHooks::kRoot);
  tok_embeddings->backward(tp_ ? tp_->leave_backward(dx_ND) : dx_ND, acts.tok_embeddings);
  if (hooks_) hooks_->after_backward(UnitHooks::kRoot);
  return Tensor();
}

StageSpan Decoder::whole_span() const {
  return {0, static_cast<int64_t>(layers.size()), tok_embeddings != nullptr, norm != nullptr};
}

void Decoder::zero_grad() {
  for (Parameter* p : parameters()) {
    if (p->grad.defined()) p->grad.zero_();
  }
}

StepContext Decoder::make_context(const Tensor& ids_BT, const Tensor& positions_BT, SequenceAttention* sequence) const {
  TITAN_CHECK(ids_BT.ndim() == 2, "[model] input ids: expected [batch, seq], got ", ids_BT.describe());
  StepContext ctx;
  ctx.batch = ids_BT.size(0);
  ctx.seq = ids_BT.size(1);
  ctx.sequence = sequence;
  TITAN_CHECK(sequence == nullptr || config_.num_linear_attention_layers() == 0,
              "[model] a sequence beyond the micro-batch's tokens reaches attention layers only, and this model has ",
              config_.num_linear_attention_layers(), " linear-attention (DeltaNet) layers whose state would restart. "
              "HINT: run the whole sequence in one forward");
  if (positions_BT.defined()) {
    TITAN_CHECK(positions_BT.shape() == ids_BT.shape() && positions_BT.dtype() == DType::i64,
                "[model] positions: expected i64", shape_str(ids_BT.shape()), " like the input ids, got ",
                positions_BT.describe());
    ctx.positions_N = positions_BT.contiguous().reshape({ctx.batch * ctx.seq});
  } else {
    ctx.positions_N = ops::make_positions({ctx.batch, ctx.seq, 0});  // every row starts at 0
  }
  ctx.rope = ops::rope_tables({config_.rope_theta, config_.rope_scaling}, ctx.positions_N, config_.rotary_dim());
  return ctx;
}

void Decoder::set_tensor_parallel(TensorParallelOps* tp, int64_t vocab_start) {
  tp_ = tp;
  vocab_start_ = vocab_start;
  if (tok_embeddings) tok_embeddings->set_vocab_start(tp ? vocab_start : -1);
  for (auto& layer : layers) layer->set_tensor_parallel(tp);
}

void Decoder::set_recompute(std::vector<Recompute> per_layer) {
  TITAN_CHECK(per_layer.size() == layers.size(), "[model] activation checkpointing: ", per_layer.size(),
              " per-layer choices for ", layers.size(), " layers");
  recompute_ = std::move(per_layer);
}

void Decoder::set_compute_dtype(DType dtype) {
  TITAN_CHECK(dtype == DType::f32 || dtype == DType::bf16, "[model] compute dtype ", dtype_name(dtype),
              " is not f32 or bf16");
  for (Parameter* p : parameters()) {
    // A frozen bf16-only base stays bf16; a quantized weight is decoded into the compute dtype.
    if (p->value.defined() || p->quantized()) p->compute_dtype = dtype;
  }
}

// HF's load_balancing_loss_func over the router outputs of every MoE layer of this forward,
// concatenated (R = layers x tokens rows, no padding mask): with C_e the (row, k) pairs routed to
// expert e and S_e the sum of its probs over all rows,
//   aux = E * sum_e (C_e / R) (S_e / R).
// For fixed counts it is linear in the probs, so d aux / d p[row, e] = E C_e / R^2, the same for
// every row of every layer: written to dprobs_E when given (each layer turns it into router-logit
// gradients in its backward). The sums were taken in the forward, layer by layer (RouterTotals).
static double aux_loss(const RouterTotals& totals, int64_t num_experts, std::vector<double>* dprobs_E) {
  const auto e = static_cast<size_t>(num_experts);
  std::vector<double> counts = totals.counts_E, prob_sums = totals.prob_sums_E;
  counts.resize(e, 0.0);
  prob_sums.resize(e, 0.0);
  const double r2 = std::pow(static_cast<double>(std::max<int64_t>(totals.rows, 1)), 2);
  double aux = 0.0;
  for (size_t j = 0; j < e; ++j) aux += counts[j] * prob_sums[j];
  if (dprobs_E != nullptr) {
    dprobs_E->resize(e);
    for (size_t j = 0; j < e; ++j) (*dprobs_E)[j] = static_cast<double>(num_experts) * counts[j] / r2;
  }
  return static_cast<double>(num_experts) * aux / r2;
}

// What is differentiated: ce_sum * grad_scale + coef * forward_scale * aux. The aux loss of the
// forward's router totals goes to `result`'s aux_loss term and its gradient with respect to every
// router's probs to acts.ctx, where each MoE layer's backward reads it.
void Decoder::add_aux_loss(Activations& acts, float forward_scale, LossResult& result) const {
  std::vector<double> dprobs_E;
  result.terms[1].sum = aux_loss(acts.router, config_.num_experts, &dprobs_E);
  for (double& g : dprobs_E) g *= static_cast<double>(config_.router_aux_loss_coef) * forward_scale;
  acts.ctx.moe_aux_dprobs_E = std::move(dprobs_E);
}

// The router totals and the aux gradient as the f64 tensors a pipeline sends (Comm moves tensors):
// host values, on any device the activations are on.
static Tensor f64_tensor(const std::vector<double>& values) {
  Tensor out = Tensor::empty({static_cast<int64_t>(values.size())}, DType::f64, Device::cpu);
  out.copy_from(Tensor::wrap(const_cast<double*>(values.data()), out.shape(), DType::f64, nullptr));
  return out;
}

static std::vector<double> f64_values(const Tensor& t_N, int64_t n, const char* what) {
  TITAN_CHECK(t_N.dtype() == DType::f64 && t_N.numel() == n, "[model] pipeline ", what, ": expected f64 [", n,
              "], got ", t_N.describe());
  std::vector<double> out(static_cast<size_t>(n));
  Tensor::wrap(out.data(), {n}, DType::f64, nullptr).copy_from(t_N.contiguous());
  return out;
}

Tensor Decoder::stage_totals(const Activations& acts) const {
  const auto e = static_cast<size_t>(config_.num_experts);
  std::vector<double> packed = acts.router.counts_E, prob_sums_E = acts.router.prob_sums_E;
  packed.resize(e, 0.0);  // empty before the first MoE layer
  prob_sums_E.resize(e, 0.0);
  packed.insert(packed.end(), prob_sums_E.begin(), prob_sums_E.end());
  packed.push_back(static_cast<double>(acts.router.rows));
  return f64_tensor(packed);
}

void Decoder::set_stage_totals(Activations& acts, const Tensor& totals) const {
  const int64_t e = config_.num_experts;
  const std::vector<double> packed = f64_values(totals, 2 * e + 1, "router totals");
  RouterTotals& r = acts.router;
  r.counts_E.assign(packed.begin(), packed.begin() + e);
  r.prob_sums_E.assign(packed.begin() + e, packed.begin() + 2 * e);
  r.rows = static_cast<int64_t>(packed[static_cast<size_t>(2 * e)]);
}

Tensor Decoder::stage_aux_grad(const Activations& acts) const {
  TITAN_CHECK(acts.ctx.moe_aux_dprobs_E.size() == static_cast<size_t>(config_.num_experts),
              "[model] pipeline: no aux-loss gradient to send (internal: the last stage's backward makes it)");
  return f64_tensor(acts.ctx.moe_aux_dprobs_E);
}

void Decoder::set_stage_aux_grad(Activations& acts, const Tensor& dprobs_E) const {
  acts.ctx.moe_aux_dprobs_E = f64_values(dprobs_E, config_.num_experts, "aux-loss gradient");
}

// The fused head + cross-entropy of the final norm's output against `targets_BT`, with the head
// weight's gradient accumulated and dhn_ND (allocated here) the gradient of hn_ND; under TP the
// vocabulary-parallel head over the gathered tokens, dhn back on this rank's share.
ops::LmHeadXentResult Decoder::head_loss_backward(const Tensor& hn_ND, const Tensor& targets_BT, float grad_scale,
                                                  Tensor& dhn_ND) {
  dhn_ND = Tensor::empty(hn_ND.shape(), DType::f32, hn_ND.device());
  if (!tp_) return output->loss(hn_ND, targets_BT, grad_scale, dhn_ND);
  const Tensor hn_full_ND = tp_->enter(hn_ND);
  Tensor dhn_full_ND = Tensor::empty(hn_full_ND.shape(), DType::f32, hn_full_ND.device());
  const ops::LmHeadXentResult xent = tp_->head_xent(hn_full_ND, head_weight().for_compute(), vocab_start_,
                                                    targets_BT.reshape({-1}), grad_scale, dhn_full_ND,
                                                    head_weight().grad);
  dhn_ND = tp_->enter_backward(dhn_full_ND);
  return xent;
}

LossResult Decoder::forward_backward(const Tensor& ids_BT, const Tensor& targets_BT,
                                     float grad_scale, float forward_scale, const Tensor& positions_BT) {
  TITAN_CHECK(targets_BT.shape() == ids_BT.shape(), "[model] targets ", targets_BT.describe(),
              " must have the shape of the input ids ", ids_BT.describe());
  check_whole("forward_backward");
  if (grad_scale == 0.0f) {
    const int64_t n = ops::count_targets(targets_BT);
    if (n > 0) grad_scale = 1.0f / static_cast<float>(n);
  }
  Activations acts;
  acts.positions_BT = positions_BT;
  const StageSpan all = whole_span();
  stage_forward(ids_BT, Tensor(), all, acts);
  LossResult result;
  stage_backward(Tensor(), targets_BT, grad_scale, all, acts, result, forward_scale);
  return result;
}

LossResult Decoder::forward_loss(const Tensor& ids_BT, const Tensor& targets_BT, const Tensor& positions_BT) {
  TITAN_CHECK(targets_BT.shape() == ids_BT.shape(), "[model] targets ", targets_BT.describe(),
              " must have the shape of the input ids ", ids_BT.describe());
  check_whole("forward_loss");
  Activations acts;
  acts.positions_BT = positions_BT;
  const StageSpan all = whole_span();
  const Tensor hn_ND = stage_forward(ids_BT, Tensor(), all, acts, false);
  LossResult result = stage_loss(hn_ND, targets_BT, all);
  if (config_.load_balance == LoadBalance::aux_loss) {
    result.terms[1].sum = aux_loss(acts.router, config_.num_experts, nullptr);
    result.loss = result.mean(1);
  }
  return result;
}

Tensor Decoder::forward_logits(const Tensor& ids_BT, const Tensor& positions_BT, SequenceAttention* sequence) {
  TITAN_CHECK(tp_ == nullptr, "[model] forward_logits is not tensor-parallel");
  check_whole("forward_logits");
  Activations acts;
  acts.positions_BT = positions_BT;
  acts.sequence = sequence;
  const Tensor hn_ND = stage_forward(ids_BT, Tensor(), whole_span(), acts, false);
  const Tensor logits_NV = output->logits(hn_ND);
  if (hooks_) hooks_->after_forward(UnitHooks::kRoot);
  return logits_NV.reshape({acts.ctx.batch, acts.ctx.seq, config_.vocab_size});
}

void Decoder::check_whole(const char* what) const {
  TITAN_CHECK(tok_embeddings && norm, "[model] ", what, " needs the whole model; this decoder holds a pipeline "
              "stage (internal: a pipeline runs it)");
}

KvCache Decoder::make_kv_cache(const std::vector<int64_t>& begin_B, int64_t capacity) const {
  TITAN_CHECK(!begin_B.empty() && capacity > 0, "[model] kv cache: ", begin_B.size(), " rows of ", capacity, " slots");
  KvCache cache;
  const auto B = static_cast<int64_t>(begin_B.size());
  // A copy of the caller's vector (wrap borrows it for the clone only).
  cache.begin_B = Tensor::wrap(const_cast<int64_t*>(begin_B.data()), {B}, DType::i64, nullptr).clone();
  cache.slots = capacity;
  const DecoderConfig& c = config_;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (c.is_linear_attention_layer(static_cast<int64_t>(i))) {
      const int64_t channels = 2 * c.linear_num_key_heads * c.linear_key_head_dim +
                               c.linear_num_value_heads * c.linear_value_head_dim;
      cache.conv_BSC.push_back(Tensor::zeros({B, c.linear_conv_kernel_dim - 1, channels}, DType::f32));
      cache.state_BHKV.push_back(Tensor::zeros(
          {B, c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim}, DType::f32));
      cache.k_BCGK.emplace_back();
      cache.v_BCGK.emplace_back();
      continue;
    }
    cache.k_BCGK.push_back(Tensor::zeros({B, capacity, c.num_kv_heads, c.head_dim}, DType::f32));
    cache.v_BCGK.push_back(Tensor::zeros({B, capacity, c.num_kv_heads, c.head_dim}, DType::f32));
    cache.conv_BSC.emplace_back();
    cache.state_BHKV.emplace_back();
  }
  return cache;
}

// Positions of slots [cache.length, cache.length + seq): slot - begin_B[b] (0 on left padding).
StepContext Decoder::make_cached_context(int64_t batch, int64_t seq, const KvCache& cache) const {
  StepContext ctx;
  ctx.batch = batch;
  ctx.seq = seq;
  ctx.positions_N = ops::make_positions({batch, seq, cache.length}, cache.begin_B);
  ctx.rope = ops::rope_tables({config_.rope_theta, config_.rope_scaling}, ctx.positions_N, config_.rotary_dim());
  if (config_.num_linear_attention_layers() > 0) {
    ctx.padding_N = Tensor::empty({batch * seq}, DType::i32, cache.begin_B.device());
    ops::positions_forward({batch, seq, cache.length, true}, cache.begin_B, ctx.padding_N);
  }
  return ctx;
}

Tensor Decoder::forward_cached(const Tensor& ids_BS, KvCache& cache, bool last_only) {
  TITAN_CHECK(tp_ == nullptr && hooks_ == nullptr, "[model] generation runs on one rank, without FSDP hooks");
  TITAN_CHECK(ids_BS.ndim() == 2 && ids_BS.size(0) == cache.batch() && ids_BS.size(1) > 0,
              "[model] generation ids: expected [", cache.batch(), ", S], got ", ids_BS.describe());
  const int64_t B = ids_BS.size(0), S = ids_BS.size(1);
  const StepContext ctx = make_cached_context(B, S, cache);
  std::any scratch;
  Tensor h_ND = tok_embeddings->forward(ids_BS, scratch);
  for (size_t i = 0; i < layers.size(); ++i) {
    h_ND = layers[i]->forward_cached(ctx, h_ND, cache, static_cast<int64_t>(i));
  }
  cache.length += S;
  if (last_only && S > 1) {  // the head on each row's last token only
    Tensor last_BD = Tensor::empty({B, config_.dim}, DType::f32, h_ND.device());
    ops::rows_strided_forward(h_ND, S - 1, S, last_BD);  // rows S - 1, 2S - 1, ...
    h_ND = last_BD;
  }
  const Tensor logits_NV = output->logits(norm->forward(h_ND, scratch));
  return logits_NV.reshape({B, last_only ? 1 : S, config_.vocab_size});
}

void Decoder::prepare_inference(DType compute) {
  set_compute_dtype(compute);
  for (Parameter* p : state()) {
    p->grad = Tensor();
    if (p->compute_dtype == DType::bf16 && p->value.defined()) {
      p->compute = ops::cast_to(p->value, DType::bf16);
      p->value = Tensor();
    }
  }
}

ParameterList Decoder::buffers() {
  ParameterList out;
  for (auto& layer : layers) layer->collect_buffers(out);
  return out;
}

ParameterList Decoder::state() {
  ParameterList out = parameters();
  for (Parameter* b : buffers()) out.push_back(b);
  return out;
}

ExpertLoad Decoder::expert_load() const {
  ExpertLoad load;
  for (const auto& layer : layers) {
    if (!layer->moe) continue;
    for (int64_t c : layer->moe->load()) {
      load.min = load.defined ? std::min(load.min, c) : c;
      load.max = load.defined ? std::max(load.max, c) : c;
      load.defined = true;
    }
  }
  return load;
}

void Decoder::reset_expert_load() {
  for (auto& layer : layers) {
    if (layer->moe) std::fill(layer->moe->load().begin(), layer->moe->load().end(), 0);
  }
}

void Decoder::update_expert_bias() {
  for (auto& layer : layers) {
    if (layer->moe) layer->moe->update_expert_bias(config_.bias_update_rate);
  }
  reset_expert_load();
}

}  // namespace titan::nn
