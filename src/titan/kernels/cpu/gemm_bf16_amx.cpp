// BLIS-style bf16 GEMM on AMX tiles (contract in gemm_bf16_amx.h).
//
// The register block is 2 x 2 tiles of 16 x 16 f32 (kMr x kNr = 32 x 32 of C in tiles 0-3), fed by
// two tiles of op(A) (4, 5: 16 rows x 16 k pairs) and two of op(B) (6, 7: 16 k pairs x 16
// columns) per step of 32 k: four _tile_dpbf16ps per four tile loads. The tile loads fix the packed
// layouts: op(A) micro-panels are kMr rows of k pairs ([row][pair], a row's pairs contiguous), op(B)
// micro-panels are k pairs of kNr columns ([pair][column], the layout vdpbf16ps reads too:
// gemm_bf16_pairs.h). Each is a copy or a 16-bit interleave where op(X) is stored that way, and a
// 16 x 16 dword transpose where it is stored the other way (op(A) transposed, op(B) not).
//
// Threads take equal slices of the larger of M and N (gemm_slices.h); each runs the BLIS loops
// over its slice alone: for each kNc columns, for each kKc k, op(B)'s block packed into kNr-column
// micro-panels, then each kMc rows of op(A) into kMr-row micro-panels, and the tile block runs over
// every (B micro-panel, A micro-panel) pair. Where the block is all of k, alpha is 1, beta 0 and
// C's rows are close, the tiles are stored into C; otherwise through an L1 block that write_block
// scales and adds, C's lines requested for writing before the tile steps. Blocking (measured on 2
// Sapphire Rapids cores, docs/performance.md (aa), (ad)): the tile steps reach ~80% of the tile
// peak from L1 and ~50% from L2 on one core (~30% with both cores streaming), but every block's
// write through write_block costs about as much as 512 k of them (a 32 x 32 f32 block read and
// written back), so k blocks are long: kKc 2048 makes each micro-panel 128 KiB, in L2 (kKc 512:
// 8-15% slower on the head's and 2048^3 products; 4096: no faster).
#include "titan/kernels/cpu/gemm_bf16_amx.h"

#include <algorithm>
#include <type_traits>

#include "titan/core/cpu_features.h"
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm_bf16_avx512.h"
#include "titan/kernels/cpu/gemm_bf16_pairs.h"
#include "titan/kernels/cpu/gemm_slices.h"

namespace titan::kernels {

bool gemm_bf16_amx_supported() {
  return gemm_bf16_avx512_supported() && cpu_features().amx_bf16 && amx_tiles_permitted();
}

namespace {

using namespace bf16_pairs;

#define TITAN_AMX_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,amx-tile,amx-bf16,prfchw")))

constexpr int64_t kMr = 32;    // rows of the register block (2 tiles)
constexpr int64_t kNr = 32;    // columns of the register block (2 tiles)
constexpr int64_t kStep = 16;  // k pairs per tile step (32 bf16: a tile row of 64 bytes)
constexpr int64_t kKc = 2048;  // k per block (a multiple of 2 kStep)
constexpr int64_t kMc = 256;   // rows per packed block of op(A), up to 2 kMc where M is no more
constexpr int64_t kNc = 1024;  // columns per packed block of op(B)
// C rows at most this many floats apart are stored from the tiles: the projections' products
// (rows 4-12 KiB apart) ran 8-20% faster so, the head's logits (rows 594 KiB apart) 15% slower.
constexpr int64_t kDirectMaxLdc = 4096;

// Pairs of a block of kc values of k, padded with zero pairs to whole tile steps.
int64_t padded_pairs(int64_t kc) { return ceil_div((kc + 1) / 2, kStep) * kStep; }

// r[i][j] <- r[j][i] for a 16 x 16 block of dwords.
TITAN_BF16_TARGET inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  // u[4g + j], 128-bit lane L: column 4L + j of rows 4g .. 4g + 3.
  for (int g = 0; g < 16; g += 4) {
    u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
    u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
    u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
    u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
  }
  // Row 4L + j of the result: lane L of u[j], u[4 + j], u[8 + j], u[12 + j].
  for (int j = 0; j < 4; ++j) {
    const __m512i x0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x44), x1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xEE);
    const __m512i y0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x44);
    const __m512i y1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xEE);
    r[j] = _mm512_shuffle_i32x4(x0, y0, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(x0, y0, 0xDD);
    r[8 + j] = _mm512_shuffle_i32x4(x1, y1, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(x1, y1, 0xDD);
  }
}

// 16 k pairs from p0 on of one row of op(X) stored along k (x points at k0), as 16 dwords; zero
// beyond kc values.
TITAN_BF16_TARGET inline __m512i row_pairs16(const uint16_t* x, int64_t p0, int64_t kc) {
  const int64_t n = std::clamp<int64_t>(kc - 2 * p0, 0, 32);
  const __mmask32 mask = n >= 32 ? ~__mmask32{0} : (__mmask32{1} << n) - 1u;
  return _mm512_maskz_loadu_epi16(mask, x + 2 * p0);
}

// The same from f32 values, rounded to bf16 as they are read (round16: nearest even, NaN kept quiet).
TITAN_BF16_TARGET inline __m512i row_pairs16(const float* x, int64_t p0, int64_t kc) {
  const int64_t n = std::clamp<int64_t>(kc - 2 * p0, 0, 32);
  const __m256i lo = _mm512_cvtepi32_epi16(round16(x + 2 * p0, std::min<int64_t>(n, 16)));
  const __m256i hi = _mm512_cvtepi32_epi16(round16(x + 2 * p0 + 16, n - 16));
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

// One micro-panel of op(A): kMr rows [row][ppad pairs] for k in [k0, k0 + kc), rows from v0 on,
// zero beyond `count` rows and kc values. op(A)[v, kk] is x[v * ld + kk] when k_contiguous, else
// x[kk * ld + v] (16 rows x 16 pairs interleaved, then transposed).
TITAN_BF16_TARGET void pack_rows(const uint16_t* x, int64_t ld, bool k_contiguous, int64_t v0, int64_t count,
                                 int64_t k0, int64_t kc, int64_t ppad, uint32_t* dst) {
  if (k_contiguous) {  // rows copied 16 pairs at a time (memcpy's rep movs took 20% of a 128^3 product)
    for (int64_t v = 0; v < kMr; ++v) {
      const uint16_t* row = x + (v0 + v) * ld + k0;
      for (int64_t p0 = 0; p0 < ppad; p0 += kStep) {
        _mm512_storeu_si512(dst + v * ppad + p0, v < count ? row_pairs16(row, p0, kc) : _mm512_setzero_si512());
      }
    }
    return;
  }
  const int64_t pairs = (kc + 1) / 2;
  for (int64_t p0 = 0; p0 < ppad; p0 += kStep) {
    for (int64_t vb = 0; vb < kMr; vb += 16) {
      const int64_t n = std::min<int64_t>(16, count - vb);
      __m512i z[16];
      for (int64_t t = 0; t < 16; ++t) {
        const int64_t p = p0 + t;
        const uint16_t* r0 = x + (k0 + 2 * p) * ld + v0 + vb;
        z[t] = n <= 0 || p >= pairs ? _mm512_setzero_si512() : pairs16(r0, 2 * p + 1 < kc ? r0 + ld : nullptr, n);
      }
      transpose16(z);  // z[t]: row vb + t's pairs p0 .. p0 + 15
      for (int64_t t = 0; t < 16; ++t) _mm512_storeu_si512(dst + (vb + t) * ppad + p0, z[t]);
    }
  }
}

// op(B)'s micro-panels for columns [v0, v0 + count) and k in [k0, k0 + kc): panel q (kNr columns
// from v0 + q kNr) at dst + q ppad kNr, ppad pairs of kNr columns [pair][column], zero beyond
// `count` columns and kc values. op(B)[kk, v] is x[v * ld + kk] when k_contiguous (16 columns x 16
// pairs loaded, then transposed), else x[kk * ld + v]: then read a pair of rows at a time across all
// panels (panel by panel, each 64-byte load was a new line of a row 2 KiB from the last: 37% of the
// lm_head's dx product went to packing, 15% after). X is bf16 (uint16_t), or f32 rounded to bf16 as
// it is read (the f32 master weight under bf16 compute: no bf16 copy of it).
template <class T>
TITAN_BF16_TARGET void pack_cols(const T* x, int64_t ld, bool k_contiguous, int64_t v0, int64_t count,
                                 int64_t k0, int64_t kc, int64_t ppad, uint32_t* dst) {
  const int64_t pairs = (kc + 1) / 2, panels = ceil_div(count, kNr);
  if (!k_contiguous) {
    // Word j of the first operand and word j of the second, for j in [0, 16) and [16, 32).
    const __m512i low = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6, 37,
                                         5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i high = _mm512_add_epi16(low, _mm512_set1_epi16(16));
    for (int64_t p = 0; p < ppad; ++p) {
      const T* r0 = x + (k0 + 2 * p) * ld + v0;
      for (int64_t q = 0; q < panels; ++q) {
        uint32_t* d = dst + (q * ppad + p) * kNr;
        const int64_t cols = std::min(kNr, count - q * kNr);
        if constexpr (std::is_same_v<T, uint16_t>) {
          if (cols == kNr && 2 * p + 1 < kc) {  // a whole panel of two bf16 rows: 32 columns interleaved
            const __m512i x0 = _mm512_loadu_si512(r0 + q * kNr), x1 = _mm512_loadu_si512(r0 + ld + q * kNr);
            _mm512_storeu_si512(d, _mm512_permutex2var_epi16(x0, low, x1));
            _mm512_storeu_si512(d + 16, _mm512_permutex2var_epi16(x0, high, x1));
            continue;
          }
        }
        for (int64_t vb = 0; vb < kNr; vb += 16) {
          const int64_t n = std::min<int64_t>(16, cols - vb);
          const T* s0 = r0 + q * kNr + vb;
          const __m512i z = n <= 0 || p >= pairs ? _mm512_setzero_si512()
                                                 : pairs16(s0, 2 * p + 1 < kc ? s0 + ld : nullptr, n);
          _mm512_storeu_si512(d + vb, z);
        }
      }
    }
    return;
  }
  for (int64_t q = 0; q < panels; ++q) {
    const int64_t cols = std::min(kNr, count - q * kNr);
    for (int64_t p0 = 0; p0 < ppad; p0 += kStep) {
      for (int64_t vb = 0; vb < kNr; vb += 16) {
        __m512i z[16];
        for (int64_t t = 0; t < 16; ++t) {
          z[t] = vb + t < cols ? row_pairs16(x + (v0 + q * kNr + vb + t) * ld + k0, p0, kc) : _mm512_setzero_si512();
        }
        transpose16(z);  // z[t]: pair p0 + t of columns vb .. vb + 15
        for (int64_t t = 0; t < 16; ++t) _mm512_storeu_si512(dst + (q * ppad + p0 + t) * kNr + vb, z[t]);
      }
    }
  }
}

// out[kMr][kNr] = the A micro-panel (kMr rows of ppad pairs) times the B micro-panel (ppad pairs
// of kNr columns, the next pair kNr dwords on). A packed op(A) is faster to load than op(A) as
// stored even where that is along k: the head's x rows, 2 KiB apart, fall into few L1 sets (its
// logits product ran at 664 instead of 1070 GFLOP/s reading them in place).
TITAN_AMX_TARGET void tile_block(int64_t ppad, const uint32_t* ap, const uint32_t* bp, float* out, int64_t ldo) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const int64_t a_stride = ppad * 4, b_stride = kNr * 4;
  for (int64_t p = 0; p < ppad; p += kStep) {
    _tile_loadd(4, ap + p, a_stride);
    _tile_loadd(5, ap + 16 * ppad + p, a_stride);
    _tile_loadd(6, bp + p * kNr, b_stride);
    _tile_loadd(7, bp + p * kNr + 16, b_stride);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, ldo * 4);
  _tile_stored(1, out + 16, ldo * 4);
  _tile_stored(2, out + 16 * ldo, ldo * 4);
  _tile_stored(3, out + 16 * ldo + 16, ldo * 4);
}

// C[rows, cols] (<= kMr x kNr, row stride ldc) gets alpha out: written as alpha out + beta C
// (beta == 0: C not read) when `first`, else added.
TITAN_BF16_TARGET void write_block(const float* out, float* c, int64_t ldc, int64_t rows, int64_t cols, float alpha,
                                   float beta, bool first) {
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(first ? beta : 1.0f);
  const __mmask16 m0 = lanes(cols), m1 = lanes(cols - 16);
  const bool read_c = !first || beta != 0.0f;
  for (int64_t i = 0; i < rows; ++i) {
    write_row32(c + i * ldc, _mm512_load_ps(out + i * kNr), _mm512_load_ps(out + i * kNr + 16), va, vb, read_c, m0, m1);
  }
}

// Where op(B)'s micro-panels come from: packed per block into this thread's buffer (packed ==
// nullptr), or read from a whole-K packing (gemm_bf16_amx_pack_b: panel q of the product's
// columns at packed + q * panel_dwords, pair p at p * kNr dwords into it).
struct BSource {
  const uint16_t* b = nullptr;
  int64_t ldb = 0;
  bool k_contiguous = false;
  const uint32_t* packed = nullptr;
  int64_t panel_dwords = 0;
  const float* b32 = nullptr;  // B in f32 instead of b, rounded to bf16 as it is packed
};

// C[m, n] (this thread's slice) = alpha op(A) op(B) + beta C; op(B)'s columns from j_base on in
// B's numbering (the packed panels are numbered over the whole product).
TITAN_AMX_TARGET void gemm_on_one_thread(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
                        const BSource& src, int64_t j_base, float beta, float* c, int64_t ldc) {
  amx_load_tile_config();
  alignas(64) float out[kMr * kNr];
  const bool a_k_contiguous = !trans_a;
  // One row block where M fits in two: a short second block would stream every B micro-panel
  // again (the head's logits chunk, M = 294: 1101 -> 1245 GFLOP/s as one block).
  const int64_t row_block = m <= 2 * kMc ? m : kMc;
  for (int64_t j0 = 0; j0 < n; j0 += kNc) {
    const int64_t nc = std::min(kNc, n - j0), panels = ceil_div(nc, kNr);
    for (int64_t k0 = 0; k0 < k; k0 += kKc) {
      const int64_t kc = std::min(kKc, k - k0), ppad = padded_pairs(kc);
      const bool first = k0 == 0;
      // C's blocks stored from the tiles where this block is all of k and C is only written.
      const bool direct = first && k0 + kc == k && alpha == 1.0f && beta == 0.0f && ldc <= kDirectMaxLdc;
      const uint32_t* bp;
      int64_t b_panel;  // dwords from one B micro-panel to the next
      if (src.packed != nullptr) {
        bp = src.packed + (j_base + j0) / kNr * src.panel_dwords + k0 / 2 * kNr;
        b_panel = src.panel_dwords;
      } else {
        uint32_t* packing = thread_pack_buffer<uint32_t, 64, 'B'>().get(panels * ppad * kNr);
        if (src.b32 != nullptr) {
          pack_cols(src.b32, src.ldb, src.k_contiguous, j_base + j0, nc, k0, kc, ppad, packing);
        } else {
          pack_cols(src.b, src.ldb, src.k_contiguous, j_base + j0, nc, k0, kc, ppad, packing);
        }
        bp = packing;
        b_panel = ppad * kNr;
      }
      for (int64_t i0 = 0; i0 < m; i0 += row_block) {
        const int64_t mc = std::min(row_block, m - i0), row_panels = ceil_div(mc, kMr);
        uint32_t* ap = thread_pack_buffer<uint32_t, 64, 'A'>().get(row_panels * kMr * ppad);
        for (int64_t r = 0; r < row_panels; ++r) {
          const int64_t row = i0 + r * kMr;
          pack_rows(a, lda, a_k_contiguous, row, std::min(kMr, m - row), k0, kc, ppad, ap + r * kMr * ppad);
        }
        const int64_t b_lines = ppad * kNr * 4 / 64;  // cache lines of a B micro-panel
        for (int64_t q = 0; q < panels; ++q) {
          const int64_t col = j0 + q * kNr;
          // A B micro-panel packed once for the whole product comes from memory: the next one is
          // fetched into L2 a share per A micro-panel while this one runs. One this thread has just
          // packed is in its caches: fetching it again cost the projections ~5%.
          const char* next_b = src.packed != nullptr && q + 1 < panels
                                   ? reinterpret_cast<const char*>(bp + (q + 1) * b_panel)
                                   : nullptr;
          for (int64_t r = 0; r < row_panels; ++r) {
            const int64_t row = i0 + r * kMr;
            if (next_b != nullptr) {
              for (int64_t l = r * b_lines / row_panels; l < (r + 1) * b_lines / row_panels; ++l) {
                _mm_prefetch(next_b + l * 64, _MM_HINT_T1);
              }
            }
            const int64_t rows = std::min(kMr, m - row), cols = std::min(kNr, n - col);
            if (direct && rows == kMr && cols == kNr) {
              tile_block(ppad, ap + r * kMr * ppad, bp + q * b_panel, c + row * ldc + col, ldc);
            } else {
              for (int64_t i = 0; i < rows; ++i) {  // C's lines requested while the tile steps run
                __builtin_prefetch(c + (row + i) * ldc + col, 1, 3);  // prefetchw
                __builtin_prefetch(c + (row + i) * ldc + col + 16, 1, 3);
              }
              tile_block(ppad, ap + r * kMr * ppad, bp + q * b_panel, out, kNr);
              write_block(out, c + row * ldc + col, ldc, rows, cols, alpha, beta, first);
            }
          }
        }
      }
    }
  }
  _tile_release();
}

// The product over thread slices (gemm_slices.h): op(A)'s rows are A's columns when trans_a.
void gemm_amx(bool trans_a, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
              const BSource& src, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, beta, c, ldc);
  for_each_thread_slice(m, n, kMr, kNr, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    gemm_on_one_thread(trans_a, i1 - i0, j1 - j0, k, alpha, a + (trans_a ? i0 : i0 * lda), lda, src, j0, beta,
                       c + i0 * ldc + j0, ldc);
  });
}

}  // namespace

// Palette 1's layout, as ldtilecfg reads it: tiles 0-7 of 16 rows x 64 bytes. A constant in memory:
// GCC 12's _tile_loadconfig tells the compiler it reads only the first 8 bytes of its operand, so
// the stores filling a local config were dropped as dead (the first tile load then faulted).
struct alignas(64) TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
constexpr TileConfig kTileConfig = {
    1, 0, {}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};

TITAN_AMX_TARGET void amx_load_tile_config() { _tile_loadconfig(&kTileConfig); }

void gemm_bf16_amx(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                   int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_amx(trans_a, m, n, k, alpha, a, lda, BSource{b, ldb, trans_b}, beta, c, ldc);
}

void gemm_bf16_amx(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  BSource src;
  src.b32 = b;
  src.ldb = ldb;
  src.k_contiguous = trans_b;
  gemm_amx(trans_a, m, n, k, alpha, a, lda, src, beta, c, ldc);
}

int64_t gemm_bf16_amx_packed_b_bytes(int64_t k, int64_t n) {
  return ceil_div(n, kNr) * padded_pairs(k) * kNr * static_cast<int64_t>(sizeof(uint32_t));
}

namespace {
template <class T>
void pack_b_whole(bool trans_b, int64_t k, int64_t n, const T* b, int64_t ldb, void* packed) {
  const int64_t ppad = padded_pairs(k);
  auto* dst = static_cast<uint32_t*>(packed);
  parallel_for(ceil_div(n, kNr), 16, [&](int64_t q0, int64_t q1) {
    pack_cols(b, ldb, trans_b, q0 * kNr, std::min(q1 * kNr, n) - q0 * kNr, 0, k, ppad, dst + q0 * ppad * kNr);
  });
}
}  // namespace

void gemm_bf16_amx_pack_b(bool trans_b, int64_t k, int64_t n, const uint16_t* b, int64_t ldb, void* packed) {
  pack_b_whole(trans_b, k, n, b, ldb, packed);
}

void gemm_bf16_amx_pack_b(bool trans_b, int64_t k, int64_t n, const float* b, int64_t ldb, void* packed) {
  pack_b_whole(trans_b, k, n, b, ldb, packed);
}

void gemm_bf16_amx_packed(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
                          const void* packed, float beta, float* c, int64_t ldc) {
  BSource src;
  src.packed = static_cast<const uint32_t*>(packed);
  src.panel_dwords = padded_pairs(k) * kNr;
  gemm_amx(false, m, n, k, alpha, a, lda, src, beta, c, ldc);
}

}  // namespace titan::kernels
