#include "titan/nn/rms_norm.h"

namespace titan::nn {

RmsNorm::RmsNorm(const RmsNormConfig& config, const std::string& fqn) : config_(config) {
  weight.init(fqn + ".weight", {config.dim}, kParameterDevice);
  weight.value.fill_(1.0f);
}

Tensor RmsNorm::forward(const Tensor& x, Saved& saved) const {
  const Tensor x_ND = x.reshape({-1, config_.dim});
  Tensor y_ND = Tensor::empty(x_ND.shape(), DType::f32, x_ND.device());
  ops::rms_norm_forward({config_.eps}, x_ND, weight.value, y_ND, saved.stats);
  saved.x = x;
  return y_ND.reshape(x.shape());
}

Tensor RmsNorm::backward(const Tensor& dy, Saved& saved) {
  const Tensor x_ND = saved.x.reshape({-1, config_.dim});
  Tensor dx_ND = Tensor::empty(x_ND.shape(), DType::f32, x_ND.device());
  ops::rms_norm_backward({config_.eps}, dy.reshape({-1, config_.dim}), x_ND, weight.value, saved.stats, dx_ND,
                         weight.grad);
  const Shape shape = saved.x.shape();
  saved = {};
  return dx_ND.reshape(shape);
}

}  // namespace titan::nn
