// Scalar reference for AdamW: one plain loop, the math of torch's _single_tensor_adam
// (decoupled weight decay) per element in double, stored as f32.
#include <cmath>

#include "titan/ops/adamw/adamw.h"

namespace titan::ops {
namespace ref {

void adamw_step(int64_t n, float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                const AdamWArgs& args) {
  const AdamWScalars s = adamw_scalars(args);
  for (int64_t i = 0; i < n; ++i) {
    const double g = grad[i];
    const double p = param[i] * s.decay;
    // The moments are stored in f32 before the update reads them, as in torch.
    const float m = static_cast<float>(exp_avg[i] + s.one_minus_beta1 * (g - exp_avg[i]));
    const float v = static_cast<float>(s.beta2 * exp_avg_sq[i] + s.one_minus_beta2 * g * g);
    const double denom = std::sqrt(static_cast<double>(v)) / s.bias_correction2_sqrt + s.eps;
    param[i] = static_cast<float>(p - s.step_size * m / denom);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

}  // namespace ref

static void step_ref(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                     const AdamWArgs& args) {
  ref::adamw_step(param.numel(), param.data<float>(), grad.data<float>(), exp_avg.data<float>(),
                  exp_avg_sq.data<float>(), args);
}

AdamWImpl adamw_impl_ref() { return {"adamw_ref", Device::cpu, nullptr, step_ref, nullptr}; }

}  // namespace titan::ops
