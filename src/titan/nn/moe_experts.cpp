#include "titan/nn/moe_experts.h"

#include "titan/core/error.h"
#include "titan/ops/elementwise/elementwise.h"

namespace titan::nn {

void ExpertsModule::keep_experts(int64_t, int64_t) {
  TITAN_FAIL("[parallel] ", describe(), " cannot be split over experts. HINT: use parallelism.expert_parallel_degree "
             "= 1 with this experts override");
}

Experts::Experts(const ExpertsConfig& config, const std::string& fqn) : config_(config) {
  const int64_t e = config.num_experts, f = config.hidden_dim, d = config.dim;
  w1.init(fqn + ".w1", {e, f, d}, parameter_device());
  w2.init(fqn + ".w2", {e, d, f}, parameter_device());
  w3.init(fqn + ".w3", {e, f, d}, parameter_device());
}

// Under bf16 compute the rows are rounded to bf16 here, in forward and again in backward (the
// block hands backward its re-dispatched f32 rows), and the grouped GEMMs run on bf16 operands
// (moe_experts.h states the roundings).
Tensor Experts::forward(const Tensor& x_PD, const Tensor& offsets_E1, std::any& saved) const {
  auto& s = saved.emplace<ops::MoeExpertsSaved>();
  Tensor y_PD = Tensor::empty(x_PD.shape(), DType::f32, x_PD.device());
  const Tensor w1_c = w1.for_compute();
  ops::moe_experts_forward(ops::cast_to(x_PD, w1_c.dtype()), offsets_E1, w1_c, w3.for_compute(), w2.for_compute(),
                           y_PD, s);
  return y_PD;
}

void Experts::backward(const Tensor& dy_PD, const Tensor& weight_NK, const Tensor& pair_of_row_P, const Tensor& x_PD,
                       const Tensor& offsets_E1, std::any& saved, Tensor& dx_PD, Tensor& dweight_NK) {
  const auto& s = std::any_cast<const ops::MoeExpertsSaved&>(saved);
  Tensor dw1 = w1.grad_sink(), dw3 = w3.grad_sink(), dw2 = w2.grad_sink();  // scratch when frozen
  const Tensor w1_c = w1.for_compute();
  ops::moe_experts_backward(dy_PD, weight_NK, pair_of_row_P, ops::cast_to(x_PD, w1_c.dtype()), offsets_E1, w1_c,
                            w3.for_compute(), w2.for_compute(), s, dx_PD, dw1, dw3, dw2, dweight_NK);
  saved.reset();
}

void Experts::collect(ParameterList& out) {
  out.push_back(&w1);
  out.push_back(&w2);
  out.push_back(&w3);
}

}  // namespace titan::nn

namespace titan::nn {

// The slice is copied (contiguous, dim 0 outermost) and the whole weight freed.
static void keep_rows(Parameter& p, int64_t first, int64_t count) {
  Tensor& data = p.data();
  data = data.narrow(0, first, count).clone();
  if (p.grad.defined()) p.grad = Tensor::zeros(data.shape(), DType::f32, data.device());
}

void Experts::keep_experts(int64_t first, int64_t count) {
  for (Parameter* p : {&w1, &w2, &w3}) keep_rows(*p, first, count);
  config_.num_experts = count;
}

}  // namespace titan::nn
