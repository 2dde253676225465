// BLIS-style bf16 GEMM on AVX-512-BF16 (contract in gemm_bf16_avx512.h).
//
// Threads take equal slices of the larger of M and N; each runs the BLIS loops over its slice alone
// (gemm_on_one_thread): for each panel of kNc columns, for each block of kKc k-values, op(B)'s block
// is packed into micro-panels of kNr columns, then each kMc rows of op(A) into micro-panels of kMr
// rows, and the register kernel runs over them (kMr x kNr of C in 24 zmm accumulators, one
// vdpbf16ps per accumulator and k pair). Packed layouts hold bf16 *pairs* along k as dwords:
// A [pair][kMr rows], B [pair][kNr columns], so one dword broadcast of A against two zmm of B feeds
// 2 x kMr dot products.
#include "titan/kernels/cpu/gemm_bf16_avx512.h"


#include <algorithm>

#include "titan/core/cpu_features.h"
#include "titan/kernels/cpu/gemm_bf16_pairs.h"
#include "titan/kernels/cpu/gemm_slices.h"

namespace titan::kernels {

bool gemm_bf16_avx512_supported() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.avx512_bf16;
}

namespace {

using namespace bf16_pairs;

// Blocking, measured on Zen 4 (docs/performance.md (t)): the dot products are slow enough (one
// zmm vdpbf16ps per cycle) that the packed panels can stream from L2 rather than L1, and a long
// k block pays off by touching C once per 4096 k: the B micro-panel is kKc * kNr * 2 B = 256 KiB
// and a row block's packed A kMc * kKc * 2 B = 384 KiB, together in a 1 MiB L2. kKc 256 (a 16 KiB
// B micro-panel in L1, the textbook choice) ran at 55-75% of peak, losing most to C's traffic.
constexpr int64_t kMr = 12;    // rows of the register tile
constexpr int64_t kNr = 32;    // columns of the register tile (2 zmm of f32)
constexpr int64_t kKc = 4096;  // k per block (even)
constexpr int64_t kMc = 48;    // rows per packed block of op(A)
constexpr int64_t kNc = 1024;  // columns per packed B panel: kKc * kNc * 2 B = 8 MiB at most

// C[rows, cols] (<= kMr x kNr, row stride ldc) gets alpha * A_panel B_panel over `pairs` k pairs:
// written as alpha acc + beta C (beta == 0: C not read) when `first`, else added.
TITAN_BF16_TARGET void micro_kernel(int64_t pairs, const uint32_t* ap, const uint32_t* bp, float* c, int64_t ldc,
                                    int64_t rows, int64_t cols, float alpha, float beta, bool first) {
  __m512 acc[kMr][2];
#pragma GCC unroll 12
  for (int64_t i = 0; i < kMr; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  // C's tile is read at the end, after pairs * 24 dot products: fetch it now, so the write-back
  // does not wait on memory (the C loads were ~12% of the kernel's time without).
  if (!first || beta != 0.0f) {
    for (int64_t i = 0; i < rows; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
    }
  }
  for (int64_t p = 0; p < pairs; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp + p * kNr);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + p * kNr + 16);
    const uint32_t* a = ap + p * kMr;
#pragma GCC unroll 12
    for (int64_t i = 0; i < kMr; ++i) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[i]));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], av, b0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], av, b1);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
  const __mmask16 m0 = lanes(cols), m1 = lanes(cols - 16);
  const bool read_c = !first || beta != 0.0f;
  const __m512 vb = _mm512_set1_ps(first ? beta : 1.0f);
#pragma GCC unroll 12
  for (int64_t i = 0; i < kMr; ++i) {
    if (i >= rows) break;
    write_row32(c + i * ldc, acc[i][0], acc[i][1], va, vb, read_c, m0, m1);
  }
}

// The whole product on the calling thread, with its own packing buffers: for each panel of kNc
// columns, for each block of kKc k-values, op(B)'s block is packed into micro-panels of kNr columns;
// for each kMc rows, op(A)'s rows into micro-panels of kMr rows; then the register kernel runs over
// every (B micro-panel, A micro-panel) pair. B's elements: uint16_t (bf16), or float rounded to
// bf16 as its blocks are packed.
template <class BElement>
void gemm_on_one_thread(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                        int64_t lda, const BElement* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // op(A)[i, kk] is a row of A along k unless trans_a; op(B)[kk, j] is a row of B along k when trans_b.
  const bool a_k_contiguous = !trans_a, b_k_contiguous = trans_b;
  for (int64_t j0 = 0; j0 < n; j0 += kNc) {
    const int64_t nc = std::min(kNc, n - j0), panels = ceil_div(nc, kNr);
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      const int64_t kc = std::min(kKc, k - k0), pairs = (kc + 1) / 2;
      const bool first = k0 == 0;
      uint32_t* bp = thread_pack_buffer<uint32_t, 64, 'B'>().get(panels * pairs * kNr);
      for (int64_t q = 0; q < panels; ++q) {
        const int64_t col = q * kNr;
        pack_panel<kNr>(b, ldb, b_k_contiguous, j0 + col, std::min(kNr, nc - col), k0, kc, bp + q * pairs * kNr);
      }
      for (int64_t i0 = 0; i0 < m; i0 += kMc) {
        const int64_t mc = std::min(kMc, m - i0), row_panels = ceil_div(mc, kMr);
        uint32_t* ap = thread_pack_buffer<uint32_t, 64, 'A'>().get(row_panels * pairs * kMr);
        for (int64_t r = 0; r < row_panels; ++r) {
          pack_panel<kMr>(a, lda, a_k_contiguous, i0 + r * kMr, std::min(kMr, mc - r * kMr), k0, kc,
                          ap + r * pairs * kMr);
        }
        for (int64_t q = 0; q < panels; ++q) {
          const int64_t col = q * kNr;
          for (int64_t r = 0; r < row_panels; ++r) {
            const int64_t row = i0 + r * kMr;
            micro_kernel(pairs, ap + r * pairs * kMr, bp + q * pairs * kNr, c + row * ldc + j0 + col, ldc,
                         std::min(kMr, m - row), std::min(kNr, nc - col), alpha, beta, first);
          }
        }
      }
    }
  }
}

}  // namespace

void gemm_bf16_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                      int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_in_slices(kMr, kNr, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                 gemm_on_one_thread<uint16_t>);
}

void gemm_bf16_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                      int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_in_slices(kMr, kNr, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                 gemm_on_one_thread<float>);
}

}  // namespace titan::kernels
