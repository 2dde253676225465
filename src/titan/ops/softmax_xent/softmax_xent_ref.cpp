// Scalar reference for the fused lm_head + cross-entropy: one token row of V logits at a time,
// plain loops, double accumulation. (Row at a time is the plainest loop order; it also keeps the
// reference usable as the fallback at full vocabulary size.)
#include <algorithm>
#include <cmath>
#include <vector>

#include "titan/ops/softmax_xent/softmax_xent.h"

namespace titan::ops {
namespace ref {

template <class T>
LmHeadXentResult lm_head_xent(int64_t ignore_index, int64_t n, int64_t d, int64_t v, const T* x,
                              const T* w, const int64_t* targets, double grad_scale, T* dx, T* dw,
                              bool bf16_dlogits) {
  LmHeadXentResult result;
  std::vector<double> logits_V(static_cast<size_t>(v)), dx_D(static_cast<size_t>(d));
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * d;
    const int64_t target = targets[r];
    if (target == ignore_index) {  // no loss, zero gradient
      if (dx != nullptr) {
        for (int64_t k = 0; k < d; ++k) dx[r * d + k] = T(0);
      }
      continue;
    }
    for (int64_t j = 0; j < v; ++j) {  // logits = x w^T
      double acc = 0.0;
      for (int64_t k = 0; k < d; ++k) acc += static_cast<double>(xr[k]) * w[j * d + k];
      logits_V[j] = acc;
    }
    double max = logits_V[0];
    for (int64_t j = 1; j < v; ++j) max = std::max(max, logits_V[j]);
    double sum = 0.0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(logits_V[j] - max);
    const double lse = max + std::log(sum);
    result.loss_sum += lse - logits_V[target];
    result.num_targets += 1;
    if (dx == nullptr && dw == nullptr) continue;
    // dlogits_j = (softmax_j - [j == target]) * grad_scale; dx = dlogits w; dw += dlogits^T x.
    for (int64_t k = 0; k < d; ++k) dx_D[k] = 0.0;
    for (int64_t j = 0; j < v; ++j) {
      double g = (std::exp(logits_V[j] - lse) - (j == target ? 1.0 : 0.0)) * grad_scale;
      if (bf16_dlogits) g = bf16_to_f32(f32_to_bf16(static_cast<float>(g)));
      for (int64_t k = 0; k < d; ++k) {
        dx_D[k] += g * w[j * d + k];
        if (dw != nullptr) dw[j * d + k] = static_cast<T>(dw[j * d + k] + g * xr[k]);
      }
    }
    if (dx != nullptr) {
      for (int64_t k = 0; k < d; ++k) dx[r * d + k] = static_cast<T>(dx_D[k]);
    }
  }
  return result;
}

template LmHeadXentResult lm_head_xent<float>(int64_t, int64_t, int64_t, int64_t, const float*,
                                              const float*, const int64_t*, double, float*, float*, bool);
template LmHeadXentResult lm_head_xent<double>(int64_t, int64_t, int64_t, int64_t, const double*,
                                               const double*, const int64_t*, double, double*,
                                               double*, bool);

}  // namespace ref

// bf16 x and w are widened to f32 (exact); dlogits are rounded to bf16 as the contract says.
static Tensor widened(const Tensor& t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); }
// The weight as the products see it: an f32 w beside a bf16 x is rounded to bf16 first.
static Tensor weight_used(const Tensor& x, const Tensor& w) {
  return widened(x.dtype() == DType::bf16 && w.dtype() == DType::f32 ? w.to(DType::bf16) : w);
}

static LmHeadXentResult forward_ref(const LmHeadXentArgs& args, const Tensor& x, const Tensor& w,
                                    const Tensor& targets) {
  const int64_t v = w.size(0), d = w.size(1);
  const Tensor x32 = widened(x), w32 = weight_used(x, w);
  return ref::lm_head_xent<float>(args.ignore_index, targets.numel(), d, v, x32.data<float>(),
                                  w32.data<float>(), targets.data<int64_t>(), 0.0, nullptr, nullptr, false);
}

static LmHeadXentResult backward_ref(const LmHeadXentArgs& args, const Tensor& x, const Tensor& w,
                                     const Tensor& targets, float grad_scale, Tensor& dx,
                                     Tensor& dw) {
  const int64_t v = w.size(0), d = w.size(1);
  const Tensor x32 = widened(x), w32 = weight_used(x, w);
  return ref::lm_head_xent<float>(args.ignore_index, targets.numel(), d, v, x32.data<float>(),
                                  w32.data<float>(), targets.data<int64_t>(), grad_scale,
                                  dx.defined() ? dx.data<float>() : nullptr,
                                  dw.defined() ? dw.data<float>() : nullptr, x.dtype() == DType::bf16);
}

LmHeadXentImpl lm_head_xent_impl_ref() {
  return {"lm_head_xent_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
