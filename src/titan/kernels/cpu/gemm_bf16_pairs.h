// The bf16 pair layout titan's AVX-512-BF16 and AMX GEMM kernels pack their operands into
// (gemm_bf16_avx512.cpp, gemm_bf16_amx.cpp): bf16 *pairs* along k held as dwords, the operand
// vdpbf16ps and _tile_dpbf16ps read ([pair][columns], "VNNI"), packed from bf16 as stored or from f32
// rounded as read. Included by those two files only (their functions carry the AVX-512 target).
#pragma once

// GCC 12's AVX-512 headers build some results from a deliberately undefined vector
// (_mm512_undefined_epi32) and then warn about it: -Wmaybe-uninitialized under -O3, and
// -Wuninitialized under the sanitizer build's -O2 (_mm512_unpacklo_epi32); false positives in
// <avx512fintrin.h>. (Clang, which builds the fuzz targets, has no -Wmaybe-uninitialized.)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace titan::kernels::bf16_pairs {

#define TITAN_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

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

// One row of a register block written back: C[0, cols) (cols <= 32) = alpha (v0 | v1) + beta C,
// C not read where !read_c.
TITAN_BF16_TARGET inline void write_row32(float* c, __m512 v0, __m512 v1, __m512 alpha, __m512 beta, bool read_c,
                                          __mmask16 m0, __mmask16 m1) {
  v0 = _mm512_mul_ps(v0, alpha);
  v1 = _mm512_mul_ps(v1, alpha);
  if (read_c) {
    v0 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m0, c), v0);
    v1 = _mm512_fmadd_ps(beta, _mm512_maskz_loadu_ps(m1, c + 16), v1);
  }
  _mm512_mask_storeu_ps(c, m0, v0);
  _mm512_mask_storeu_ps(c + 16, m1, v1);
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

}  // namespace titan::kernels::bf16_pairs
