#include "titan/nn/feed_forward.h"

#include "titan/ops/swiglu/swiglu.h"

namespace titan::nn {

void FeedForwardModule::drop_recomputable(std::any&) const {}
void FeedForwardModule::recompute(const Tensor&, std::any&) const {}

FeedForward::FeedForward(const FeedForwardConfig& config, const ModuleBuild& build)
    : w1(build.child<LinearModule>("w1")),
      w2(build.child<LinearModule>("w2")),
      w3(build.child<LinearModule>("w3")),
      config_(config) {}

static Tensor swiglu(const Tensor& gate_NF, const Tensor& up_NF) {
  Tensor h_NF = Tensor::empty(gate_NF.shape(), DType::f32, gate_NF.device());
  ops::swiglu_forward(gate_NF, up_NF, h_NF);
  return h_NF;
}

Tensor FeedForward::forward(const Tensor& x_ND, std::any& saved) const {
  Saved& s = saved.emplace<Saved>();
  const Tensor x_in = w1->compute_input(x_ND);  // cast once for both projections
  s.gate_NF = w1->forward(x_in, s.w1);
  s.up_NF = w3->forward(x_in, s.w3);
  return w2->forward(swiglu(s.gate_NF, s.up_NF), s.w2);
}

Tensor FeedForward::backward(const Tensor& dy_ND, std::any& saved) {
  Saved& s = std::any_cast<Saved&>(saved);
  const Tensor dh_NF = w2->backward(dy_ND, s.w2);
  Tensor dgate_NF = Tensor::empty(s.gate_NF.shape(), DType::f32, s.gate_NF.device()),
         dup_NF = Tensor::empty(s.up_NF.shape(), DType::f32, s.up_NF.device());
  ops::swiglu_backward(dh_NF, s.gate_NF, s.up_NF, dgate_NF, dup_NF);
  s.gate_NF = s.up_NF = Tensor();
  Tensor dx_ND = w1->backward(dgate_NF, s.w1);
  add_inplace(dx_ND, w3->backward(dup_NF, s.w3));
  saved.reset();
  return dx_ND;
}

void FeedForward::drop_recomputable(std::any& saved) const {
  Saved& s = std::any_cast<Saved&>(saved);
  s.w1 = s.w3 = s.w2 = {};
}

void FeedForward::recompute(const Tensor& x_ND, std::any& saved) const {
  Saved& s = std::any_cast<Saved&>(saved);
  s.w1.x_NI = s.w3.x_NI = w1->compute_input(x_ND);
  s.w2.x_NI = w2->compute_input(swiglu(s.gate_NF, s.up_NF));
}

void FeedForward::collect(ParameterList& out) {
  w1->collect(out);
  w2->collect(out);
  w3->collect(out);
}

}  // namespace titan::nn
