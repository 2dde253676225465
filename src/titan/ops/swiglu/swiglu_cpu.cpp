// SwiGLU on CPU: the flat array split over threads, 16-lane vectors, the tail through the same
// vector math on a partial load. Elementwise, so the result does not depend on the split.
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/swiglu/swiglu.h"

namespace titan::ops {

using namespace titan::kernels;

// Elements per thread chunk at least: below this the fork costs more than the work.
constexpr int64_t kGrain = 1 << 14;

// sigmoid via e = exp(-|g|) in (0, 1]: exp never overflows, and for g < 0 the result
// e / (1 + e) keeps its relative precision. exp16 flushes e to 0 below -87, where the true
// sigmoid(g) is < 1e-37 anyway.
template <class f32x16>
TITAN_SIMD_INLINE f32x16 sigmoid16(f32x16 g) {
  const f32x16 e = exp16(select(g < 0.0f, g, -g));
  const f32x16 r = 1.0f / (1.0f + e);
  return select(g >= 0.0f, r, e * r);
}

template <class f32x16>
TITAN_SIMD_INLINE f32x16 swiglu16(f32x16 g, f32x16 u) {
  return g * sigmoid16(g) * u;
}

TITAN_SIMD_KERNEL(static void, forward_range,
                  (int64_t begin, int64_t end, const float* gate, const float* up, float* h),
                  (begin, end, gate, up, h)) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) store16(h + i, swiglu16(load16<f32x16>(gate + i), load16<f32x16>(up + i)));
  if (i < end) {
    const int64_t m = end - i;
    store16_partial(h + i, swiglu16(load16_partial<f32x16>(gate + i, m), load16_partial<f32x16>(up + i, m)), m);
  }
}

// dgate = dh * up * s * (1 + g * (1 - s)), dup = dh * g * s (swiglu.md). Both outputs are
// computed from loaded registers before either store.
template <class f32x16>
TITAN_SIMD_INLINE void swiglu_grad16(f32x16 d, f32x16 g, f32x16 u, f32x16& dg, f32x16& du) {
  const f32x16 s = sigmoid16(g);
  dg = d * u * s * fmadd(g, 1.0f - s, splat16<f32x16>(1.0f));
  du = d * g * s;
}

TITAN_SIMD_KERNEL(static void, backward_range,
                  (int64_t begin, int64_t end, const float* dh, const float* gate, const float* up,
                   float* dgate, float* dup),
                  (begin, end, dh, gate, up, dgate, dup)) {
  f32x16 dg, du;
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) {
    swiglu_grad16(load16<f32x16>(dh + i), load16<f32x16>(gate + i), load16<f32x16>(up + i), dg, du);
    store16(dgate + i, dg);
    store16(dup + i, du);
  }
  if (i < end) {
    const int64_t m = end - i;
    swiglu_grad16(load16_partial<f32x16>(dh + i, m), load16_partial<f32x16>(gate + i, m),
                  load16_partial<f32x16>(up + i, m), dg, du);
    store16_partial(dgate + i, dg, m);
    store16_partial(dup + i, du, m);
  }
}

static void forward_cpu(const Tensor& gate, const Tensor& up, Tensor& h) {
  const float* gp = gate.data<float>();
  const float* upp = up.data<float>();
  float* hp = h.data<float>();
  parallel_for(gate.numel(), kGrain, [&](int64_t b, int64_t e) { forward_range(b, e, gp, upp, hp); });
}

static void backward_cpu(const Tensor& dh, const Tensor& gate, const Tensor& up, Tensor& dgate,
                         Tensor& dup) {
  const float* dhp = dh.data<float>();
  const float* gp = gate.data<float>();
  const float* upp = up.data<float>();
  float* dgp = dgate.data<float>();
  float* dupp = dup.data<float>();
  parallel_for(gate.numel(), kGrain,
               [&](int64_t b, int64_t e) { backward_range(b, e, dhp, gp, upp, dgp, dupp); });
}

SwigluImpl swiglu_impl_cpu() { return {"swiglu_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu}; }

}  // namespace titan::ops
