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

// GCC 12's AVX-512 headers build some results from a deliberately undefined vector
// (_mm512_undefined_epi32) and then warn about it under -O3 (-Wmaybe-uninitialized, a false
// positive in <avx512fintrin.h>).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "titan/core/cpu_features.h"
#include "titan/kernels/cpu/gemm_slices.h"

namespace titan::kernels {

bool gemm_bf16_avx512_supported() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512dq && f.avx512vl && f.avx512_bf16;
}

namespace {

#define TITAN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

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

// 64-byte aligned dwords, reused across calls by the thread that owns them.
struct PackBuffer {
  std::vector<uint32_t> storage;
  uint32_t* get(int64_t dwords) {
    const size_t need = static_cast<size_t>(dwords) + 16;
    if (storage.size() < need) storage.assign(need, 0);
    auto p = reinterpret_cast<uintptr_t>(storage.data());
    return reinterpret_cast<uint32_t*>((p + 63) & ~uintptr_t{63});
  }
};

// Lanes [0, n) set, n in [0, 16].
inline __mmask16 lanes(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max<int64_t>(n, 0)) - 1u);
}

// n (<= 16) f32 values rounded to bf16, one per dword's low half (zero beyond n): nearest even,
// NaN kept quiet, bit for bit core/dtype.h's f32_to_bf16 (and kernels/cpu/cast.cpp's vector form;
// vcvtneps2bf16 would differ on subnormal inputs, which it flushes).
TITAN_BF16_TARGET inline __m512i round16(const float* x, int64_t n) {
  const __m512i u = _mm512_maskz_loadu_epi32(lanes(n), x);
  const __m512i rounded = _mm512_srli_epi32(
      _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                           _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1)))),
      16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
  return _mm512_mask_blend_epi32(nan, rounded, quiet);
}

// (x0[i], x1[i]) as dwords for i in [0, n), n <= 16; x1 may be null (the pad of an odd k). bf16
// values are taken as they are, f32 values rounded (round16).
TITAN_BF16_TARGET inline __m512i pairs16(const uint16_t* x0, const uint16_t* x1, int64_t n) {
  const __mmask16 mask = lanes(n);
  const __m512i lo = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, x0));
  if (x1 == nullptr) return lo;
  const __m512i hi = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(mask, x1));
  return _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
}
TITAN_BF16_TARGET inline __m512i pairs16(const float* x0, const float* x1, int64_t n) {
  const __m512i lo = round16(x0, n);
  return x1 == nullptr ? lo : _mm512_or_si512(lo, _mm512_slli_epi32(round16(x1, n), 16));
}

// One row's kc values along k as (kc + 1) / 2 pair dwords into d[p * width] (an odd kc's last pair
// padded with zero): bf16 copied, f32 rounded 16 values at a time.
template <int64_t width>
void row_pairs(const uint16_t* row, int64_t kc, uint32_t* d) {
  const int64_t full = kc / 2;
  for (int64_t p = 0; p < full; ++p) {
    uint32_t w;
    std::memcpy(&w, row + 2 * p, sizeof(w));
    d[p * width] = w;
  }
  if (2 * full < kc) d[full * width] = row[2 * full];
}
template <int64_t width>
TITAN_BF16_TARGET void row_pairs(const float* row, int64_t kc, uint32_t* d) {
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t p0 = 0; p0 < pairs; p0 += 8) {  // 16 values: their bf16 halves, packed in order, are 8 pairs
    alignas(32) uint32_t eight[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(eight),
                       _mm512_cvtepi32_epi16(round16(row + 2 * p0, std::min<int64_t>(16, kc - 2 * p0))));
    for (int64_t i = 0; i < 8 && p0 + i < pairs; ++i) d[(p0 + i) * width] = eight[i];
  }
}

// Packs `count` (<= width) vectors of op(X) that run along the non-k dimension into one
// micro-panel [pair][width] for k in [k0, k0 + kc), zero beyond count. op(X)[v, kk] is
// x[v * ld + kk] when k_contiguous, else x[kk * ld + v]. X is bf16 (uint16_t), or f32 rounded to
// bf16 as it is read.
template <int64_t width, class T>
TITAN_BF16_TARGET void pack_panel(const T* x, int64_t ld, bool k_contiguous, int64_t v0, int64_t count, int64_t k0,
                                  int64_t kc, uint32_t* dst) {
  const int64_t pairs = (kc + 1) / 2;
  if (k_contiguous) {
    for (int64_t v = 0; v < width; ++v) {
      uint32_t* d = dst + v;
      if (v >= count) {
        for (int64_t p = 0; p < pairs; ++p) d[p * width] = 0u;
      } else {
        row_pairs<width>(x + (v0 + v) * ld + k0, kc, d);
      }
    }
    return;
  }
  for (int64_t p = 0; p < pairs; ++p) {
    const T* r0 = x + (k0 + 2 * p) * ld + v0;
    const T* r1 = 2 * p + 1 < kc ? r0 + ld : nullptr;
    uint32_t* d = dst + p * width;
    for (int64_t v = 0; v < width; v += 16) {
      const int64_t n = std::min<int64_t>(16, count - v);
      const __mmask16 store = lanes(std::min<int64_t>(16, width - v));
      const __m512i pair = n <= 0 ? _mm512_setzero_si512() : pairs16(r0 + v, r1 == nullptr ? nullptr : r1 + v, n);
      _mm512_mask_storeu_epi32(d + v, store, pair);
    }
  }
}

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
    float* ci = c + i * ldc;
    __m512 v0 = _mm512_mul_ps(acc[i][0], va), v1 = _mm512_mul_ps(acc[i][1], va);
    if (read_c) {
      v0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, ci), v0);
      v1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, ci + 16), v1);
    }
    _mm512_mask_storeu_ps(ci, m0, v0);
    _mm512_mask_storeu_ps(ci + 16, m1, v1);
  }
}

// The calling thread's packed op(B) block and each thread's packed op(A) rows, shared by both
// B element types.
PackBuffer& b_pack_buffer() {
  static thread_local PackBuffer buffer;
  return buffer;
}
PackBuffer& a_pack_buffer() {
  static thread_local PackBuffer buffer;
  return buffer;
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
      uint32_t* bp = b_pack_buffer().get(panels * pairs * kNr);
      for (int64_t q = 0; q < panels; ++q) {
        const int64_t col = q * kNr;
        pack_panel<kNr>(b, ldb, b_k_contiguous, j0 + col, std::min(kNr, nc - col), k0, kc, bp + q * pairs * kNr);
      }
      for (int64_t i0 = 0; i0 < m; i0 += kMc) {
        const int64_t mc = std::min(kMc, m - i0), row_panels = ceil_div(mc, kMr);
        uint32_t* ap = a_pack_buffer().get(row_panels * pairs * kMr);
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
