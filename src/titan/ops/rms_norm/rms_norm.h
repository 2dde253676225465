// RMSNorm over the last dim, fp32 statistics (as HF Qwen3RMSNorm):
//   rstd = 1 / sqrt(mean(x^2) + eps);  y = (weight_offset + weight) * (x * rstd)
// weight_offset 1: the zero-centred norm (HF Qwen3_5RMSNorm, Gemma: x * (1 + w), weights stored as
// w); 0: the plain one. The sum offset + w is rounded to f32 first, as HF computes it.
// Shapes: N rows (tokens, or tokens x heads for q/k norm), D features.
//   x_ND, weight_D -> y_ND; saved rstd_N.
// Accumulation: dx is written (=); dweight is accumulated (+=).
// Derivation of the backward: rms_norm.md.
#pragma once

#include <vector>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct RmsNormArgs {
  float eps = 1e-6f;
  float weight_offset = 0.0f;
};

// The weight the kernels multiply by: weight_offset + weight (f32), for a non-zero offset.
std::vector<float> offset_weight(const RmsNormArgs& args, const Tensor& weight_D);

struct RmsNormSaved {
  Tensor rstd_N;  // f32
};

// Throws naming the tensor and the expected shape.
void check_rms_norm(const Tensor& x_ND, const Tensor& weight_D);

void rms_norm_forward(const RmsNormArgs& args, const Tensor& x_ND, const Tensor& weight_D,
                      Tensor& y_ND, RmsNormSaved& saved);
void rms_norm_backward(const RmsNormArgs& args, const Tensor& dy_ND, const Tensor& x_ND,
                       const Tensor& weight_D, const RmsNormSaved& saved, Tensor& dx_ND,
                       Tensor& dweight_D);

using RmsNormImpl = OpImpl<bool (*)(const Tensor& x_ND, const Tensor& weight_D),
                           void (*)(const RmsNormArgs&, const Tensor&, const Tensor&, Tensor&,
                                    RmsNormSaved&),
                           void (*)(const RmsNormArgs&, const Tensor&, const Tensor&, const Tensor&,
                                    const RmsNormSaved&, Tensor&, Tensor&)>;
OpTable<RmsNormImpl>& rms_norm_table();
RmsNormImpl rms_norm_impl_ref();
RmsNormImpl rms_norm_impl_cpu();

namespace ref {
// Scalar reference over raw row-major arrays; instantiated for float and double (the double
// instance is what the finite-difference check differentiates).
template <class T>
void rms_norm_forward(float eps, int64_t n, int64_t d, const T* x, const T* weight, T* y, T* rstd);
template <class T>
void rms_norm_backward(int64_t n, int64_t d, const T* dy, const T* x, const T* weight,
                       const T* rstd, T* dx, T* dweight);
}  // namespace ref

}  // namespace titan::ops
