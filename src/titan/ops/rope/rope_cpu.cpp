// RoPE on CPU: the N*H rows of K lanes split over threads, 16-lane vectors over each half.
// Backward is the same rotation with sin negated (exact in f32), so one kernel serves both.
// Each step loads both halves before storing either, so y may alias x.
#include <algorithm>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/rope/rope.h"

namespace titan::ops {

using namespace titan::kernels;

// Rotates the first k of `lanes` lanes of rows [begin, end) (h heads per token: row r belongs to
// token r / h); lanes k .. lanes-1 are copied (partial rotary).
// sign = +1: y = R(angle) x (forward); sign = -1: y = R(-angle) x (backward, the transpose).
TITAN_SIMD_KERNEL(static void, rotate_rows,
                  (int64_t begin, int64_t end, int64_t h, int64_t k, int64_t lanes, const float* cos,
                   const float* sin, float sign, const float* x, float* y),
                  (begin, end, h, k, lanes, cos, sin, sign, x, y)) {
  const int64_t k2 = k / 2;
  for (int64_t r = begin; r < end; ++r) {
    const float* c = cos + (r / h) * k2;
    const float* s = sin + (r / h) * k2;
    const float* xr = x + r * lanes;
    float* yr = y + r * lanes;
    if (yr != xr) std::copy(xr + k, xr + lanes, yr + k);
    int64_t i = 0;
    for (; i + kLanes <= k2; i += kLanes) {
      const f32x16 cv = load16<f32x16>(c + i), sv = load16<f32x16>(s + i) * sign;
      const f32x16 x1 = load16<f32x16>(xr + i), x2 = load16<f32x16>(xr + k2 + i);
      store16(yr + i, fmsub(x1, cv, x2 * sv));
      store16(yr + k2 + i, fmadd(x2, cv, x1 * sv));
    }
    if (i < k2) {  // the tail on partial loads (simd.h)
      const int64_t m = k2 - i;
      const f32x16 cv = load16_partial<f32x16>(c + i, m), sv = load16_partial<f32x16>(s + i, m) * sign;
      const f32x16 x1 = load16_partial<f32x16>(xr + i, m), x2 = load16_partial<f32x16>(xr + k2 + i, m);
      store16_partial(yr + i, fmsub(x1, cv, x2 * sv), m);
      store16_partial(yr + k2 + i, fmadd(x2, cv, x1 * sv), m);
    }
  }
}

static void rotate_cpu(const RopeTables& tables, const Tensor& x, Tensor& y, float sign) {
  const int64_t lanes = x.size(-1), h = x.size(-2), rows = x.numel() / lanes, k = tables.head_dim;
  const float* cp = tables.cos_NK2.data<float>();
  const float* sp = tables.sin_NK2.data<float>();
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  parallel_for(rows, 32, [&](int64_t b, int64_t e) { rotate_rows(b, e, h, k, lanes, cp, sp, sign, xp, yp); });
}

static void forward_cpu(const RopeTables& tables, const Tensor& x, Tensor& y) {
  rotate_cpu(tables, x, y, 1.0f);
}

static void backward_cpu(const RopeTables& tables, const Tensor& dy, Tensor& dx) {
  rotate_cpu(tables, dy, dx, -1.0f);
}

RopeImpl rope_impl_cpu() { return {"rope_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu}; }

}  // namespace titan::ops
