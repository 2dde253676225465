#include "titan/nn/linear.h"

#include "titan/ops/matmul/linear.h"

namespace titan::nn {

Linear::Linear(const LinearConfig& config, const std::string& fqn) : config_(config) {
  weight.init(fqn + ".weight", {config.out_features, config.in_features}, kParameterDevice);
  if (config.bias) bias.init(fqn + ".bias", {config.out_features}, kParameterDevice);
}

Tensor Linear::forward(const Tensor& x_NI) {
  Tensor y_NO =
      Tensor::empty({x_NI.numel() / config_.in_features, config_.out_features}, DType::f32, x_NI.device());
  ops::linear_forward(x_NI, weight.value, bias.value, y_NO);
  x_NI_ = x_NI;
  return y_NO;
}

Tensor Linear::backward(const Tensor& dy_NO, bool need_dx) {
  Tensor dx_NI;
  if (need_dx) dx_NI = Tensor::empty(x_NI_.shape(), DType::f32, x_NI_.device());
  ops::linear_backward(dy_NO, x_NI_, weight.value, dx_NI, weight.grad, bias.grad);
  x_NI_ = Tensor();
  return dx_NI;
}

void Linear::collect(ParameterList& out) {
  out.push_back(&weight);
  if (bias.defined()) out.push_back(&bias);
}

}  // namespace titan::nn
