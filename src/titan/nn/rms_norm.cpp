#include "titan/nn/rms_norm.h"

namespace titan::nn {

RmsNorm::RmsNorm(const RmsNormConfig& config, const std::string& fqn) : config_(config) {
  weight.init(fqn + ".weight", {config.dim}, parameter_device());
  Tensor ones = Tensor::empty({config.dim});
  ones.fill_(1.0f - config.weight_offset);  // an effective weight of 1
  weight.data().copy_from(ones);  // a frozen base may store it in bf16
}

Tensor RmsNorm::forward(const Tensor& x, std::any& saved) const {
  Saved& s = saved.emplace<Saved>();
  const Tensor x_ND = x.reshape({-1, config_.dim});
  Tensor y_ND = Tensor::empty(x_ND.shape(), DType::f32, x_ND.device());
  ops::rms_norm_forward({config_.eps, config_.weight_offset}, x_ND, weight.for_compute_f32(), y_ND, s.stats);
  s.x = x;
  return y_ND.reshape(x.shape());
}

Tensor RmsNorm::backward(const Tensor& dy, std::any& saved) {
  Saved& s = std::any_cast<Saved&>(saved);
  const Tensor x_ND = s.x.reshape({-1, config_.dim});
  Tensor dx_ND = Tensor::empty(x_ND.shape(), DType::f32, x_ND.device());
  Tensor dweight = weight.grad_sink();
  ops::rms_norm_backward({config_.eps, config_.weight_offset}, dy.reshape({-1, config_.dim}), x_ND, weight.for_compute_f32(), s.stats, dx_ND,
                         dweight);
  const Shape shape = s.x.shape();
  saved.reset();
  return dx_ND.reshape(shape);
}

}  // namespace titan::nn
