// AdamW parameter update (torch.optim.AdamW, decoupled weight decay, amsgrad=False,
// maximize=False), one tensor at a time. For step t (1-based) and element i:
//   p   *= 1 - lr * weight_decay
//   m    = m + (1 - beta1) * (g - m)          (= beta1 * m + (1 - beta1) * g; torch uses lerp)
//   v    = beta2 * v + (1 - beta2) * g * g
//   p   -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Shapes: N flat elements, any rank; param_N, grad_N, exp_avg_N (m), exp_avg_sq_N (v) are
// contiguous tensors of the same shape, four distinct buffers that do not overlap; param and grad
// f32, the moments both f32 or both bf16 (optimizer.state_dtype). bf16 moments are read as f32,
// the new m and v computed in f32 and stored rounded to nearest even (core/dtype.h's f32_to_bf16),
// and the parameter update reads the stored (rounded) moments, as it reads the stored f32 ones
// (torch stores a moment, then reads it). Nearest even, not stochastic: deterministic, so a run
// is bit-identical under any sharding and across a resume without a rounding stream to save; its
// cost is that a moment's change below half a bf16 ulp (2^-9 relative) is lost, which v's decay
// (1 - beta2 per step) stays above for beta2 <= 0.99 (the trainer warns beyond).
// In place: param, exp_avg, exp_avg_sq are updated (=); grad is read only.
// An optimizer step is never differentiated, so this op has a forward only (AdamWImpl's
// backward slot is std::nullptr_t).
#pragma once

#include <cstddef>
#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct AdamWArgs {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  int64_t step = 1;  // 1-based, after this update: drives the bias corrections
};

// Throws naming the tensor (or argument), what was found and what was expected.
void check_adamw(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const AdamWArgs& args);

void adamw_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                const AdamWArgs& args);

using AdamWImpl = OpImpl<bool (*)(const Tensor& param, const Tensor& grad),
                         void (*)(Tensor& param, const Tensor& grad, Tensor& exp_avg,
                                  Tensor& exp_avg_sq, const AdamWArgs& args),
                         std::nullptr_t>;
OpTable<AdamWImpl>& adamw_table();
AdamWImpl adamw_impl_ref();
AdamWImpl adamw_impl_cpu();

// The per-call scalars of the update, computed once in double as torch does (Python floats),
// then used in f32 by the kernels.
struct AdamWScalars {
  double decay;            // 1 - lr * weight_decay
  double one_minus_beta1;  // lerp weight
  double beta2;
  double one_minus_beta2;
  double step_size;              // lr / (1 - beta1^step)
  double bias_correction2_sqrt;  // sqrt(1 - beta2^step)
  double eps;
};
AdamWScalars adamw_scalars(const AdamWArgs& args);

namespace ref {
// Scalar reference over n flat elements, per-element math in double; the moments f32, or bf16
// (raw bits).
void adamw_step(int64_t n, float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                const AdamWArgs& args);
void adamw_step(int64_t n, float* param, const float* grad, uint16_t* exp_avg, uint16_t* exp_avg_sq,
                const AdamWArgs& args);
}  // namespace ref

}  // namespace titan::ops
