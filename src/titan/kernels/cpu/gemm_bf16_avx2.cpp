// BLIS-style bf16 GEMM on AVX2 FMA (contract in gemm_bf16_avx2.h): the products of bf16 operands at
// the f32 FMA rate, with no f32 copy of either operand.
//
// Threads take equal slices of the larger of M and N; each runs the BLIS loops over its slice alone
// (gemm_on_one_thread): operands are widened to f32 as they are packed, op(A) into micro-panels of
// kMr rows [k][kMr], op(B) into micro-panels of kNr columns [k][kNr], and the register kernel keeps
// kMr x kNr of C in 12 ymm accumulators (one FMA per accumulator and k).
//
// Blocking (the BLIS choice for AVX2 sgemm, measured in docs/performance.md (y)): a B micro-panel
// is kKc * kNr * 4 B = 16 KiB, in L1 while every A micro-panel of a row block passes it; a row
// block's packed A is kMc * kKc * 4 B = 144 KiB, in L2; a packed B panel 4 MiB at most, in L3.
#include "titan/kernels/cpu/gemm_bf16_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "titan/kernels/cpu/gemm_slices.h"

namespace titan::kernels {
namespace {

constexpr int64_t kMr = 6;     // rows of the register tile
constexpr int64_t kNr = 16;    // columns of the register tile (2 ymm of f32)
constexpr int64_t kKc = 256;   // k per block
constexpr int64_t kMc = 144;   // rows per packed block of op(A) (24 register tiles)
constexpr int64_t kNc = 4080;  // columns per packed B panel (255 register tiles)

// Lanes [0, n) of a ymm set, n in [0, 8] (clamped).
inline __m256i lanes(int64_t n) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(n, 0, 8))), index);
}

// n values from x (all 8 when n >= 8, zero beyond n), as f32: bf16 widened; f32 rounded to bf16
// (nearest even, NaN kept quiet: bit for bit core/dtype.h's f32_to_bf16) and widened back.
inline __m256 load8(const uint16_t* x, int64_t n) {
  __m128i h;
  if (n >= 8) {
    h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x));
  } else {
    alignas(16) uint16_t tail[8] = {};
    if (n > 0) std::memcpy(tail, x, static_cast<size_t>(n) * sizeof(uint16_t));
    h = _mm_load_si128(reinterpret_cast<const __m128i*>(tail));
  }
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline __m256 load8(const float* x, int64_t n) {
  const __m256i u = _mm256_castps_si256(_mm256_maskload_ps(x, lanes(n)));
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)), high);
  const __m256i quiet = _mm256_or_si256(_mm256_and_si256(u, high), _mm256_set1_epi32(0x00400000));
  // |u| as a signed dword is non-negative, so the signed compare orders it as unsigned.
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  return _mm256_castsi256_ps(_mm256_blendv_epi8(rounded, quiet, nan));
}

// r[i][j] <- r[j][i] for an 8 x 8 block of f32.
inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 s0 = _mm256_shuffle_ps(t0, t2, 0x44), s1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 s2 = _mm256_shuffle_ps(t1, t3, 0x44), s3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 s4 = _mm256_shuffle_ps(t4, t6, 0x44), s5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 s6 = _mm256_shuffle_ps(t5, t7, 0x44), s7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(s0, s4, 0x20);
  r[1] = _mm256_permute2f128_ps(s1, s5, 0x20);
  r[2] = _mm256_permute2f128_ps(s2, s6, 0x20);
  r[3] = _mm256_permute2f128_ps(s3, s7, 0x20);
  r[4] = _mm256_permute2f128_ps(s0, s4, 0x31);
  r[5] = _mm256_permute2f128_ps(s1, s5, 0x31);
  r[6] = _mm256_permute2f128_ps(s2, s6, 0x31);
  r[7] = _mm256_permute2f128_ps(s3, s7, 0x31);
}

// 8 floats (lanes == 8) or the first `lanes` of them to d.
inline void store_lanes(float* d, __m256 v, int64_t lanes_count) {
  if (lanes_count == 8) {
    _mm256_storeu_ps(d, v);
  } else {
    _mm256_maskstore_ps(d, lanes(lanes_count), v);
  }
}

// Packs `count` (<= width) vectors of op(X) that run along the non-k dimension into one
// micro-panel [k][width] of f32 for k in [k0, k0 + kc), zero beyond count. op(X)[v, kk] is
// x[v * ld + kk] when k_contiguous (read 8 x 8 and transposed), else x[kk * ld + v] (read 8 at a
// time). `avail` (>= count) vectors of op(X) exist from v0 on, so the strided form may read past
// count: count < width only in op(X)'s last panel (kMc and kNc are multiples of the tile), where
// avail == count.
template <int64_t width, class T>
void pack_panel(const T* x, int64_t ld, bool k_contiguous, int64_t v0, int64_t count, int64_t avail, int64_t k0,
                int64_t kc, float* dst) {
  if (k_contiguous) {
    for (int64_t g = 0; g < width; g += 8) {
      const int64_t group = std::min<int64_t>(8, width - g);
      for (int64_t kk = 0; kk < kc; kk += 8) {
        const int64_t n = std::min<int64_t>(8, kc - kk);
        __m256 r[8];
        for (int64_t t = 0; t < 8; ++t) {
          const int64_t v = g + t;
          r[t] = t < group && v < count ? load8(x + (v0 + v) * ld + k0 + kk, n) : _mm256_setzero_ps();
        }
        transpose8(r);
        for (int64_t j = 0; j < n; ++j) store_lanes(dst + (kk + j) * width + g, r[j], group);
      }
    }
    return;
  }
  for (int64_t kk = 0; kk < kc; ++kk) {
    const T* row = x + (k0 + kk) * ld + v0;
    float* d = dst + kk * width;
    for (int64_t g = 0; g < width; g += 8) {
      const int64_t n = std::min<int64_t>(8, (count < width ? count : avail) - g);
      store_lanes(d + g, n <= 0 ? _mm256_setzero_ps() : load8(row + g, n), std::min<int64_t>(8, width - g));
    }
  }
}

// acc[i][h] = the kMr x kNr tile A_panel B_panel over kc values of k. A function of its own, so
// that nothing else holds a register across the loop: 12 accumulators, 2 B vectors and A's
// broadcast take all 16 ymm (inlined into micro_kernel, alpha stayed in one and an accumulator
// spilled to the stack, halving the rate). Not AddressSanitizer-instrumented: it reads only the
// packed panels, whose bounds the (instrumented) packing code fixes, and the checks on its 8 loads
// per 12 FMAs made the sanitizer pass's bf16 products 4x slower (a Muon run 39 s instead of 10 s).
__attribute__((noinline, no_sanitize_address)) void tile_product(int64_t kc, const float* ap, const float* bp, __m256 (&acc)[kMr][2]) {
  __m256 t[kMr][2];
#pragma GCC unroll 6
  for (int64_t i = 0; i < kMr; ++i) t[i][0] = t[i][1] = _mm256_setzero_ps();
  for (int64_t p = 0; p < kc; ++p) {
    const __m256 b0 = _mm256_load_ps(bp + p * kNr);
    const __m256 b1 = _mm256_load_ps(bp + p * kNr + 8);
    const float* a = ap + p * kMr;
#pragma GCC unroll 6
    for (int64_t i = 0; i < kMr; ++i) {
      const __m256 av = _mm256_broadcast_ss(a + i);
      t[i][0] = _mm256_fmadd_ps(av, b0, t[i][0]);
      t[i][1] = _mm256_fmadd_ps(av, b1, t[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int64_t i = 0; i < kMr; ++i) {
    acc[i][0] = t[i][0];
    acc[i][1] = t[i][1];
  }
}

// C[rows, cols] (<= kMr x kNr, row stride ldc) gets alpha * A_panel B_panel over kc values of k:
// written as alpha acc + beta C (beta == 0: C not read) when `first`, else added.
void micro_kernel(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, int64_t rows, int64_t cols,
                  float alpha, float beta, bool first) {
  const bool read_c = !first || beta != 0.0f;
  if (read_c) {  // C's tile is read after kc * 12 FMAs: fetch it now
    for (int64_t i = 0; i < rows; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + kNr - 1), _MM_HINT_T0);
    }
  }
  __m256 acc[kMr][2];
  tile_product(kc, ap, bp, acc);
  const __m256 va = _mm256_set1_ps(alpha);
  const __m256 vb = _mm256_set1_ps(first ? beta : 1.0f);
  const __m256i m0 = lanes(cols), m1 = lanes(cols - 8);
  const bool full = cols == kNr;
#pragma GCC unroll 6
  for (int64_t i = 0; i < kMr; ++i) {
    if (i >= rows) break;
    float* ci = c + i * ldc;
    __m256 v0 = _mm256_mul_ps(acc[i][0], va), v1 = _mm256_mul_ps(acc[i][1], va);
    if (full) {
      if (read_c) {
        v0 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci), v0);
        v1 = _mm256_fmadd_ps(vb, _mm256_loadu_ps(ci + 8), v1);
      }
      _mm256_storeu_ps(ci, v0);
      _mm256_storeu_ps(ci + 8, v1);
    } else {
      if (read_c) {
        v0 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci, m0), v0);
        v1 = _mm256_fmadd_ps(vb, _mm256_maskload_ps(ci + 8, m1), v1);
      }
      _mm256_maskstore_ps(ci, m0, v0);
      _mm256_maskstore_ps(ci + 8, m1, v1);
    }
  }
}

// The whole product on the calling thread, with its own packing buffers: for each panel of kNc
// columns, for each block of kKc k-values, op(B)'s block is packed into micro-panels of kNr columns;
// for each kMc rows, op(A)'s rows into micro-panels of kMr rows; then the register kernel runs over
// every (B micro-panel, A micro-panel) pair, each A micro-panel passing the B micro-panel in L1.
// B's elements: uint16_t (bf16), or float rounded to bf16 as its blocks are packed.
template <class BElement>
void gemm_on_one_thread(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                        int64_t lda, const BElement* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  // op(A)[i, kk] is a row of A along k unless trans_a; op(B)[kk, j] is a row of B along k when trans_b.
  const bool a_k_contiguous = !trans_a, b_k_contiguous = trans_b;
  for (int64_t j0 = 0; j0 < n; j0 += kNc) {
    const int64_t nc = std::min(kNc, n - j0), panels = ceil_div(nc, kNr);
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      const int64_t kc = std::min(kKc, k - k0);
      const bool first = k0 == 0;
      float* bp = thread_pack_buffer<float, 32, 'B'>().get(panels * kc * kNr);
      for (int64_t q = 0; q < panels; ++q) {
        const int64_t col = q * kNr;
        pack_panel<kNr>(b, ldb, b_k_contiguous, j0 + col, std::min(kNr, nc - col), n - j0 - col, k0, kc,
                        bp + q * kc * kNr);
      }
      for (int64_t i0 = 0; i0 < m; i0 += kMc) {
        const int64_t mc = std::min(kMc, m - i0), row_panels = ceil_div(mc, kMr);
        float* ap = thread_pack_buffer<float, 32, 'A'>().get(row_panels * kc * kMr);
        for (int64_t r = 0; r < row_panels; ++r) {
          const int64_t row = i0 + r * kMr;
          pack_panel<kMr>(a, lda, a_k_contiguous, row, std::min(kMr, m - row), m - row, k0, kc, ap + r * kc * kMr);
        }
        for (int64_t q = 0; q < panels; ++q) {
          const int64_t col = q * kNr;
          for (int64_t r = 0; r < row_panels; ++r) {
            const int64_t row = i0 + r * kMr;
            micro_kernel(kc, ap + r * kc * kMr, bp + q * kc * kNr, c + row * ldc + j0 + col, ldc,
                         std::min(kMr, m - row), std::min(kNr, nc - col), alpha, beta, first);
          }
        }
      }
    }
  }
}

}  // namespace

void gemm_bf16_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                    int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_in_slices(kMr, kNr, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                 gemm_on_one_thread<uint16_t>);
}

void gemm_bf16_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_in_slices(kMr, kNr, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                 gemm_on_one_thread<float>);
}

}  // namespace titan::kernels
