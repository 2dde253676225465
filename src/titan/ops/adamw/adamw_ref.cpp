// Scalar reference for AdamW: one plain loop, the math of torch's _single_tensor_adam
// (decoupled weight decay) per element in double, stored as f32 (the moments: f32 or bf16).
#include <cmath>

#include "titan/ops/adamw/adamw.h"

namespace titan::ops {
namespace ref {
namespace {

float load(const float* m, int64_t i) { return m[i]; }
float load(const uint16_t* m, int64_t i) { return bf16_to_f32(m[i]); }
// Stores x in the moment's dtype and returns the stored value (what the update reads).
float store(float* m, int64_t i, float x) { return m[i] = x; }
float store(uint16_t* m, int64_t i, float x) {
  m[i] = f32_to_bf16(x);
  return bf16_to_f32(m[i]);
}

template <class Moment>
void step(int64_t n, float* param, const float* grad, Moment* exp_avg, Moment* exp_avg_sq, const AdamWArgs& args) {
  const AdamWScalars s = adamw_scalars(args);
  for (int64_t i = 0; i < n; ++i) {
    const double g = grad[i];
    const double p = param[i] * s.decay;
    const double m0 = load(exp_avg, i), v0 = load(exp_avg_sq, i);
    // The moments are stored (f32, or rounded to bf16) before the update reads them, as in torch.
    const float m = store(exp_avg, i, static_cast<float>(m0 + s.one_minus_beta1 * (g - m0)));
    const float v = store(exp_avg_sq, i, static_cast<float>(s.beta2 * v0 + s.one_minus_beta2 * g * g));
    const double denom = std::sqrt(static_cast<double>(v)) / s.bias_correction2_sqrt + s.eps;
    param[i] = static_cast<float>(p - s.step_size * m / denom);
  }
}

}  // namespace

void adamw_step(int64_t n, float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                const AdamWArgs& args) {
  step(n, param, grad, exp_avg, exp_avg_sq, args);
}

void adamw_step(int64_t n, float* param, const float* grad, uint16_t* exp_avg, uint16_t* exp_avg_sq,
                const AdamWArgs& args) {
  step(n, param, grad, exp_avg, exp_avg_sq, args);
}

}  // namespace ref

static void step_ref(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                     const AdamWArgs& args) {
  if (exp_avg.dtype() == DType::bf16) {
    ref::adamw_step(param.numel(), param.data<float>(), grad.data<float>(), static_cast<uint16_t*>(exp_avg.raw_data()),
                    static_cast<uint16_t*>(exp_avg_sq.raw_data()), args);
    return;
  }
  ref::adamw_step(param.numel(), param.data<float>(), grad.data<float>(), exp_avg.data<float>(),
                  exp_avg_sq.data<float>(), args);
}

AdamWImpl adamw_impl_ref() { return {"adamw_ref", Device::cpu, nullptr, step_ref, nullptr}; }

}  // namespace titan::ops
