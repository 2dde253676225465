#include "titan/nn/linear.h"

#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/matmul/linear.h"

namespace titan::nn {

Linear::Linear(const LinearConfig& config, const std::string& fqn) : config_(config) {
  weight.init(fqn + ".weight", {config.out_features, config.in_features}, parameter_device(), /*quantizable=*/true);
  if (config.bias) bias.init(fqn + ".bias", {config.out_features}, parameter_device());
}

Tensor Linear::forward(const Tensor& x_NI, Saved& saved) const {
  const Tensor w_OI = weight.for_gemm();
  const Tensor x = ops::cast_to(x_NI, weight.compute_dtype);  // a no-op when the caller cast it already
  Tensor y_NO =
      Tensor::empty({x_NI.numel() / config_.in_features, config_.out_features}, DType::f32, x_NI.device());
  ops::linear_forward(x, w_OI, config_.bias ? bias.for_compute_f32() : Tensor(), y_NO);
  saved.x_NI = x;
  return y_NO;
}

Tensor Linear::compute_input(const Tensor& x_NI) const { return ops::cast_to(x_NI, weight.compute_dtype); }

Tensor Linear::backward(const Tensor& dy_NO, Saved& saved, bool need_dx) {
  Tensor dx_NI;
  if (need_dx) dx_NI = Tensor::empty(saved.x_NI.shape(), DType::f32, saved.x_NI.device());
  ops::linear_backward(dy_NO, saved.x_NI, weight.for_gemm(), dx_NI, weight.grad, bias.grad);
  saved = {};
  return dx_NI;
}

void Linear::collect(ParameterList& out) {
  out.push_back(&weight);
  if (bias.defined()) out.push_back(&bias);
}

}  // namespace titan::nn
