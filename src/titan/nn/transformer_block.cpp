#include "titan/nn/transformer_block.h"

namespace titan::nn {

TransformerBlock::TransformerBlock(const TransformerBlockConfig& config, const std::string& fqn)
    : attention_norm({config.attention.dim, config.norm_eps}, fqn + ".attention_norm"),
      attention(config.attention, fqn + ".attention"),
      ffn_norm({config.attention.dim, config.norm_eps}, fqn + ".ffn_norm") {
  if (config.moe) {
    moe = std::make_unique<Moe>(*config.moe, fqn + ".moe");
  } else {
    feed_forward = std::make_unique<FeedForward>(config.feed_forward, fqn + ".feed_forward");
  }
}

Tensor TransformerBlock::forward(const StepContext& ctx, const Tensor& x_ND) {
  const Tensor xn_ND = attention_norm.forward(x_ND);
  Tensor h_ND = tp_ ? tp_->leave(attention.forward(ctx, tp_->enter(xn_ND))) : attention.forward(ctx, xn_ND);
  add_inplace(h_ND, x_ND);
  const Tensor hn_ND = ffn_norm.forward(h_ND);
  Tensor y_ND = moe ? moe->forward(hn_ND)
                    : tp_ ? tp_->leave(feed_forward->forward(tp_->enter(hn_ND))) : feed_forward->forward(hn_ND);
  add_inplace(y_ND, h_ND);
  return y_ND;
}

Tensor TransformerBlock::backward(const StepContext& ctx, const Tensor& dy_ND) {
  // dh = dy + d(mlp branch)/dh; dx = dh + d(attention branch)/dx.
  Tensor dhn_ND = moe ? moe->backward(dy_ND)
                      : tp_ ? tp_->enter_backward(feed_forward->backward(tp_->leave_backward(dy_ND)))
                            : feed_forward->backward(dy_ND);
  Tensor dh_ND = ffn_norm.backward(dhn_ND);
  add_inplace(dh_ND, dy_ND);
  const Tensor dxn_ND = tp_ ? tp_->enter_backward(attention.backward(ctx, tp_->leave_backward(dh_ND)))
                            : attention.backward(ctx, dh_ND);
  Tensor dx_ND = attention_norm.backward(dxn_ND);
  add_inplace(dx_ND, dh_ND);
  return dx_ND;
}

void TransformerBlock::collect(ParameterList& out) {
  attention_norm.collect(out);
  attention.collect(out);
  ffn_norm.collect(out);
  if (moe) {
    moe->collect(out);
  } else {
    feed_forward->collect(out);
  }
}

void TransformerBlock::collect_buffers(ParameterList& out) {
  if (moe) moe->collect_buffers(out);
}

void TransformerBlock::release() {
  attention_norm.release();
  attention.release();
  ffn_norm.release();
  if (moe) moe->release();
  if (feed_forward) feed_forward->release();
}

}  // namespace titan::nn
