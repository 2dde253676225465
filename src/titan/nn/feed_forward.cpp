#include "titan/nn/feed_forward.h"

#include "titan/ops/swiglu/swiglu.h"

namespace titan::nn {

FeedForward::FeedForward(const FeedForwardConfig& config, const std::string& fqn)
    : w1({config.dim, config.hidden_dim, config.bias}, fqn + ".w1"),
      w2({config.hidden_dim, config.dim, config.bias}, fqn + ".w2"),
      w3({config.dim, config.hidden_dim, config.bias}, fqn + ".w3"),
      config_(config) {}

Tensor FeedForward::forward(const Tensor& x_ND) {
  gate_NF_ = w1.forward(x_ND);
  up_NF_ = w3.forward(x_ND);
  Tensor h_NF = Tensor::empty(gate_NF_.shape(), DType::f32, gate_NF_.device());
  ops::swiglu_forward(gate_NF_, up_NF_, h_NF);
  return w2.forward(h_NF);
}

Tensor FeedForward::backward(const Tensor& dy_ND) {
  const Tensor dh_NF = w2.backward(dy_ND);
  Tensor dgate_NF = Tensor::empty(gate_NF_.shape(), DType::f32, gate_NF_.device()),
         dup_NF = Tensor::empty(up_NF_.shape(), DType::f32, up_NF_.device());
  ops::swiglu_backward(dh_NF, gate_NF_, up_NF_, dgate_NF, dup_NF);
  gate_NF_ = up_NF_ = Tensor();
  Tensor dx_ND = w1.backward(dgate_NF);
  add_inplace(dx_ND, w3.backward(dup_NF));
  return dx_ND;
}

void FeedForward::collect(ParameterList& out) {
  w1.collect(out);
  w2.collect(out);
  w3.collect(out);
}

void FeedForwardModule::check(int64_t, int64_t) const {}

ModuleSlot<FeedForwardModule, FeedForwardNode>& feed_forward_slot() {
  static ModuleSlot<FeedForwardModule, FeedForwardNode> slot(
      "feed-forward", "FeedForward", [](const FeedForwardNode& node, const std::string& fqn) {
        return std::make_unique<FeedForward>(node.config, fqn);
      });
  return slot;
}

void FeedForward::release() {
  w1.release();
  w2.release();
  w3.release();
  gate_NF_ = up_NF_ = Tensor();
}

}  // namespace titan::nn
