// RMSNorm on CPU: rows split over threads, 16-lane vectors; dweight reduced from per-thread
// partial sums in a fixed order (deterministic for a given thread count).
#include <cmath>
#include <algorithm>
#include <vector>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/rms_norm/rms_norm.h"

namespace titan::ops {

using namespace titan::kernels;

// Row tails (d not a multiple of 16) go through the vector arithmetic on partial loads, zeros in
// the unused lanes, not through scalar loops: GCC vectorizes a scalar loop per ISA level, and the
// two levels rounded a tail's dot product differently (Mode::isa_levels of the op test found it).
TITAN_SIMD_KERNEL(static void, forward_rows,
                  (float eps, int64_t begin, int64_t end, int64_t d, const float* x, const float* w, float* y,
                   float* rstd),
                  (eps, begin, end, d, x, w, y, rstd)) {
  for (int64_t i = begin; i < end; ++i) {
    const float* xi = x + i * d;
    float* yi = y + i * d;
    f32x16 acc = {};
    int64_t j = 0;
    for (; j + kLanes <= d; j += kLanes) {
      const f32x16 v = load16<f32x16>(xi + j);
      acc = fmadd(v, v, acc);
    }
    if (j < d) {
      const f32x16 v = load16_partial<f32x16>(xi + j, d - j);
      acc = fmadd(v, v, acc);
    }
    const float sum_sq = hsum16(acc);
    const float r = 1.0f / std::sqrt(sum_sq / static_cast<float>(d) + eps);
    rstd[i] = r;
    j = 0;
    for (; j + kLanes <= d; j += kLanes) store16(yi + j, load16<f32x16>(w + j) * (load16<f32x16>(xi + j) * r));
    if (j < d) {
      const int64_t m = d - j;
      store16_partial(yi + j, load16_partial<f32x16>(w + j, m) * (load16_partial<f32x16>(xi + j, m) * r), m);
    }
  }
}

TITAN_SIMD_KERNEL(static void, backward_rows,
                  (int64_t begin, int64_t end, int64_t d, const float* dy, const float* x, const float* w,
                   const float* rstd, float* dx, float* dw),
                  (begin, end, d, dy, x, w, rstd, dx, dw)) {
  for (int64_t i = begin; i < end; ++i) {
    const float* xi = x + i * d;
    const float* dyi = dy + i * d;
    float* dxi = dx + i * d;
    const float r = rstd[i];
    f32x16 acc = {};
    int64_t j = 0;
    for (; j + kLanes <= d; j += kLanes) {
      acc = fmadd(load16<f32x16>(w + j) * load16<f32x16>(dyi + j), load16<f32x16>(xi + j), acc);
    }
    if (j < d) {
      const int64_t m = d - j;
      acc = fmadd(load16_partial<f32x16>(w + j, m) * load16_partial<f32x16>(dyi + j, m),
                  load16_partial<f32x16>(xi + j, m), acc);
    }
    const float dot = hsum16(acc);
    const float mean = dot * r / static_cast<float>(d);  // mean(w*dy*xhat)
    j = 0;
    for (; j + kLanes <= d; j += kLanes) {
      const f32x16 xhat = load16<f32x16>(xi + j) * r;
      const f32x16 g = load16<f32x16>(dyi + j);
      store16(dxi + j, fmsub(load16<f32x16>(w + j), g, xhat * mean) * r);
      store16(dw + j, fmadd(g, xhat, load16<f32x16>(dw + j)));
    }
    if (j < d) {
      const int64_t m = d - j;
      const f32x16 xhat = load16_partial<f32x16>(xi + j, m) * r;
      const f32x16 g = load16_partial<f32x16>(dyi + j, m);
      store16_partial(dxi + j, fmsub(load16_partial<f32x16>(w + j, m), g, xhat * mean) * r, m);
      store16_partial(dw + j, fmadd(g, xhat, load16_partial<f32x16>(dw + j, m)), m);
    }
  }
}

static void forward_cpu(const RmsNormArgs& args, const Tensor& x, const Tensor& w, Tensor& y,
                        RmsNormSaved& saved) {
  const int64_t n = x.size(0), d = x.size(1);
  const float* xp = x.data<float>();
  const std::vector<float> shifted = args.weight_offset != 0.0f ? offset_weight(args, w) : std::vector<float>();
  const float* wp = shifted.empty() ? w.data<float>() : shifted.data();
  float* yp = y.data<float>();
  float* rp = saved.rstd_N.data<float>();
  parallel_for(n, 16, [&](int64_t b, int64_t e) { forward_rows(args.eps, b, e, d, xp, wp, yp, rp); });
}

static void backward_cpu(const RmsNormArgs& args, const Tensor& dy, const Tensor& x, const Tensor& w,
                         const RmsNormSaved& saved, Tensor& dx, Tensor& dw) {
  const int64_t n = x.size(0), d = x.size(1);
  const std::vector<float> shifted = args.weight_offset != 0.0f ? offset_weight(args, w) : std::vector<float>();
  const float* wp = shifted.empty() ? w.data<float>() : shifted.data();
  const int threads = num_threads();
  // partial_TD: one dweight partial per thread slot (in double), summed in slot order below. Each
  // slot sums blocks of kBlockRows rows in float into block_D, then adds the block to its double
  // partial: one short float32 running sum instead of one over thousands of rows (a q_norm's rows
  // are B x T x heads), whose rounding put that gradient 3x further from float64 than torch's
  // pairwise sum (issue 49). The extra work is d double adds per 32 rows.
  constexpr int64_t kBlockRows = 32;
  std::vector<double> partial_TD(static_cast<size_t>(threads) * d, 0.0);
  const int64_t chunk = (n + threads - 1) / threads;
  parallel_for(threads, 1, [&](int64_t tb, int64_t te) {
    std::vector<float> block_D(static_cast<size_t>(d));
    for (int64_t t = tb; t < te; ++t) {
      const int64_t b = t * chunk, e = std::min(n, b + chunk);
      double* partial = partial_TD.data() + t * d;
      for (int64_t rb = b; rb < e; rb += kBlockRows) {
        std::fill(block_D.begin(), block_D.end(), 0.0f);
        backward_rows(rb, std::min(e, rb + kBlockRows), d, dy.data<float>(), x.data<float>(), wp,
                      saved.rstd_N.data<float>(), dx.data<float>(), block_D.data());
        for (int64_t j = 0; j < d; ++j) partial[j] += block_D[static_cast<size_t>(j)];
      }
    }
  });
  float* dwp = dw.data<float>();
  for (int64_t j = 0; j < d; ++j) {
    double sum = 0.0;
    for (int t = 0; t < threads; ++t) sum += partial_TD[static_cast<size_t>(t) * d + j];
    dwp[j] = static_cast<float>(dwp[j] + sum);
  }
}

RmsNormImpl rms_norm_impl_cpu() { return {"rms_norm_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu}; }

}  // namespace titan::ops
