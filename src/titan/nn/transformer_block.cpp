#include "titan/nn/transformer_block.h"

namespace titan::nn {

std::vector<Recompute> recompute_per_layer(const std::string& mode, const std::string& option, int64_t num_layers) {
  const auto layers = static_cast<size_t>(num_layers);
  if (mode == "none") return std::vector<Recompute>(layers, Recompute::keep_all);
  if (mode == "full") return std::vector<Recompute>(layers, Recompute::keep_input);
  TITAN_CHECK(mode == "selective", "[nn] activation checkpointing mode '", mode,
              "' is not one of none, full, selective (activation_checkpoint.mode)");
  if (option == "op") return std::vector<Recompute>(layers, Recompute::keep_ops);
  const bool digits = !option.empty() && option.size() < 10 &&
                      option.find_first_not_of("0123456789") == std::string::npos;
  TITAN_CHECK(digits, "[nn] selective activation checkpointing option '", option,
              "' is neither 'op' nor a block count (activation_checkpoint.selective_ac_option)");
  const int64_t every = std::stoll(option);
  std::vector<Recompute> out(layers, Recompute::keep_all);
  for (size_t i = 0; i < layers; ++i) {
    if (every <= 1 || (static_cast<int64_t>(i) + 1) % every == 0) out[i] = Recompute::keep_input;
  }
  return out;
}

TransformerBlock::TransformerBlock(const ModuleBuild& build)
    : attention_norm(build.child<RmsNormModule>("attention_norm")),
      attention(build.child<AttentionModule>("attention")),
      ffn_norm(build.child<RmsNormModule>("ffn_norm")) {
  if (build.has_child("moe")) {
    moe = build.child<MoeModule>("moe");
  } else {
    feed_forward = build.child<FeedForwardModule>("feed_forward");
  }
}

// The forward itself, filling every module's saved state. totals null: a replay (nothing counted).
Tensor TransformerBlock::run(const StepContext& ctx, const Tensor& x_ND, Saved& s, RouterTotals* totals) {
  s.x_ND = x_ND;
  const Tensor xn_ND = attention_norm->forward(x_ND, s.attention_norm);
  Tensor h_ND = tp_ ? tp_->leave(attention->forward(ctx, tp_->enter(xn_ND), s.attention))
                    : attention->forward(ctx, xn_ND, s.attention);
  add_inplace(h_ND, x_ND);
  s.h_ND = h_ND;
  const Tensor hn_ND = ffn_norm->forward(h_ND, s.ffn_norm);
  Tensor y_ND = moe ? moe->forward(hn_ND, s.mlp, totals)
                    : tp_ ? tp_->leave(feed_forward->forward(tp_->enter(hn_ND), s.mlp))
                          : feed_forward->forward(hn_ND, s.mlp);
  add_inplace(y_ND, h_ND);
  return y_ND;
}

Tensor TransformerBlock::forward_cached(const StepContext& ctx, const Tensor& x_ND, KvCache& cache, int64_t layer) {
  TITAN_CHECK(tp_ == nullptr, "[model] generation is not tensor-parallel");
  std::any scratch;  // each module's saved state, dropped
  Tensor h_ND = attention->forward_cached(ctx, attention_norm->forward(x_ND, scratch), cache, layer);
  add_inplace(h_ND, x_ND);
  const Tensor hn_ND = ffn_norm->forward(h_ND, scratch);
  Tensor y_ND = moe ? moe->forward(hn_ND, scratch, nullptr) : feed_forward->forward(hn_ND, scratch);
  add_inplace(y_ND, h_ND);
  return y_ND;
}

Tensor TransformerBlock::forward(const StepContext& ctx, const Tensor& x_ND, Saved& saved, Recompute recompute,
                                 RouterTotals* totals) {
  saved = {};
  saved.recompute = recompute;
  if (recompute == Recompute::keep_input) {
    Saved scratch;
    const Tensor y_ND = run(ctx, x_ND, scratch, totals);
    saved.x_ND = x_ND;
    return y_ND;
  }
  const Tensor y_ND = run(ctx, x_ND, saved, totals);
  if (recompute == Recompute::keep_ops) drop_recomputable(saved);
  return y_ND;
}

// keep_ops drops the norms' outputs (the projections' and the mlp's inputs), q and k after norm
// and RoPE, and the SwiGLU output; the norms keep their inputs (x and h) and statistics.
void TransformerBlock::drop_recomputable(Saved& s) const {
  attention->drop_recomputable(s.attention);
  if (moe) {
    moe->drop_recomputable(s.mlp);
  } else {
    feed_forward->drop_recomputable(s.mlp);
  }
}

// Puts back what forward dropped, with the same kernels on the same inputs (bit-identical).
// Under tensor parallelism the regions' inputs are gathered again, as in the forward.
void TransformerBlock::recompute(const StepContext& ctx, Saved& s) {
  if (s.recompute == Recompute::keep_input) {
    const Tensor x_ND = s.x_ND;
    s = {};
    run(ctx, x_ND, s, nullptr);
    return;
  }
  if (s.recompute != Recompute::keep_ops) return;
  std::any scratch;  // the norms' kept state; this replay's copy equals it
  attention->recompute(ctx, enter(attention_norm->forward(s.x_ND, scratch)), s.attention);
  const Tensor hn_ND = ffn_norm->forward(s.h_ND, scratch);
  if (moe) {
    moe->recompute(hn_ND, s.mlp);
  } else {
    feed_forward->recompute(enter(hn_ND), s.mlp);
  }
}

Tensor TransformerBlock::backward(const StepContext& ctx, const Tensor& dy_ND, Saved& s) {
  recompute(ctx, s);
  // dh = dy + d(mlp branch)/dh; dx = dh + d(attention branch)/dx.
  Tensor dhn_ND = moe ? moe->backward(ctx, dy_ND, s.mlp)
                      : tp_ ? tp_->enter_backward(feed_forward->backward(tp_->leave_backward(dy_ND), s.mlp))
                            : feed_forward->backward(dy_ND, s.mlp);
  Tensor dh_ND = ffn_norm->backward(dhn_ND, s.ffn_norm);
  add_inplace(dh_ND, dy_ND);
  const Tensor dxn_ND = tp_ ? tp_->enter_backward(attention->backward(ctx, tp_->leave_backward(dh_ND), s.attention))
                            : attention->backward(ctx, dh_ND, s.attention);
  Tensor dx_ND = attention_norm->backward(dxn_ND, s.attention_norm);
  add_inplace(dx_ND, dh_ND);
  s = {};
  return dx_ND;
}

void TransformerBlock::collect(ParameterList& out) {
  attention_norm->collect(out);
  attention->collect(out);
  ffn_norm->collect(out);
  if (moe) {
    moe->collect(out);
  } else {
    feed_forward->collect(out);
  }
}

void TransformerBlock::check(int64_t batch, int64_t seq) const {
  attention_norm->check(batch, seq);
  attention->check(batch, seq);
  ffn_norm->check(batch, seq);
  if (moe) {
    moe->check(batch, seq);
  } else {
    feed_forward->check(batch, seq);
  }
}

void TransformerBlock::collect_buffers(ParameterList& out) {
  if (moe) moe->collect_buffers(out);
}

}  // namespace titan::nn
