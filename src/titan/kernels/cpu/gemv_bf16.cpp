#include "titan/kernels/cpu/gemv_bf16.h"

#include <immintrin.h>

#include "titan/core/cpu_features.h"
#include "titan/core/parallel.h"

namespace titan::kernels {

bool gemv_bf16_supported() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512dq && f.avx512_bf16;
}

#define TITAN_GEMV_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))

TITAN_GEMV_TARGET static inline __m512bh load_bf16(const uint16_t* p, __mmask32 mask) {
  return (__m512bh)_mm512_maskz_loadu_epi16(mask, p);
}

// The 16 lanes' sum by halving (GCC 12's _mm512_reduce_add_ps trips -Wmaybe-uninitialized).
TITAN_GEMV_TARGET static inline float sum_lanes(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  q = _mm_add_ss(q, _mm_movehdup_ps(q));
  return _mm_cvtss_f32(q);
}

// Rows [n0, n1) of w against the m rows of x, one row of w at a time: w is read strictly in
// order (the hardware prefetcher streams it, and a software prefetch runs kPrefetch bytes ahead),
// four 32-pair vectors per iteration into independent accumulators per x row.
constexpr int64_t kPrefetch = 4096;

TITAN_GEMV_TARGET static void rows(int64_t m, int64_t n0, int64_t n1, int64_t n, int64_t k, const uint16_t* x,
                                   const uint16_t* w, bool accumulate, float* y) {
  for (int64_t j = n0; j < n1; ++j) {
    const uint16_t* wj = w + j * k;
    __m512 acc[kGemvMaxRows][4];
    for (int64_t r = 0; r < m; ++r) {
      for (int q = 0; q < 4; ++q) acc[r][q] = _mm512_setzero_ps();
    }
    int64_t i = 0;
    for (; i + 128 <= k; i += 128) {
      _mm_prefetch(reinterpret_cast<const char*>(wj + i) + kPrefetch, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(wj + i) + kPrefetch + 64, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(wj + i) + kPrefetch + 128, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(wj + i) + kPrefetch + 192, _MM_HINT_T0);
      __m512bh wv[4];
      for (int q = 0; q < 4; ++q) wv[q] = (__m512bh)_mm512_loadu_si512(wj + i + 32 * q);
      for (int64_t r = 0; r < m; ++r) {
        for (int q = 0; q < 4; ++q) {
          acc[r][q] = _mm512_dpbf16_ps(acc[r][q], (__m512bh)_mm512_loadu_si512(x + r * k + i + 32 * q), wv[q]);
        }
      }
    }
    for (; i < k; i += 32) {
      const __mmask32 mask = k - i >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((1ull << (k - i)) - 1);
      const __m512bh wv = load_bf16(wj + i, mask);
      for (int64_t r = 0; r < m; ++r) acc[r][0] = _mm512_dpbf16_ps(acc[r][0], load_bf16(x + r * k + i, mask), wv);
    }
    for (int64_t r = 0; r < m; ++r) {
      const float v = sum_lanes(_mm512_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]), _mm512_add_ps(acc[r][2], acc[r][3])));
      float& out = y[r * n + j];
      out = accumulate ? out + v : v;
    }
  }
}

void gemv_bf16(int64_t m, int64_t n, int64_t k, const uint16_t* x, const uint16_t* w, bool accumulate, float* y) {
  // Chunks of >= 256 rows of w: enough bytes per thread to be worth a fork.
  parallel_for(n, 256, [&](int64_t n0, int64_t n1) { rows(m, n0, n1, n, k, x, w, accumulate, y); });
}

}  // namespace titan::kernels
