// titan's own bf16 GEMM on AMX tiles (_tile_dpbf16ps): the signature and contract of
// kernels::gemm_bf16 (bf16 A and B, f32 C, row-major, alpha / beta, any transposes and strides).
// gemm_bf16 routes here where this kernel measured faster than oneDNN 2.6's AMX matmul
// (docs/performance.md (aa)); it is called directly only by tests and benchmarks.
//
// Arithmetic: each C element is an f32 sum over k; a tile step adds 32 products (16 k pairs, each
// pair's two exact products summed) to the f32 accumulator in the order the instruction defines
// (denormal bf16 inputs and f32 outputs flushed to zero; k padded with zero pairs to a multiple of
// 32). K is cut into blocks of kKc at fixed offsets; each block's partial sum is added to C
// (alpha-scaled; the first block also applies beta). The order depends only on k, never on the
// thread count or the tiling of M and N, so results are bitwise reproducible.
#pragma once

#include <cstdint>

namespace titan::kernels {

// True where the CPU has AMX-BF16 (and AVX-512-BF16, which the packing uses) and Linux granted the
// process the tile state.
bool gemm_bf16_amx_supported();

void gemm_bf16_amx(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                   int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);
// B in f32, rounded to bf16 (nearest even, core/dtype.h's f32_to_bf16) as it is packed: bit for bit
// the product on B rounded first, with no bf16 copy of B (gemm_bf16_round_b on AMX).
void gemm_bf16_amx(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                   int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// op(B) [k, n] packed once for many products with different A (the lm_head's weight across its
// token chunks): gemm_bf16_amx_packed_b_bytes(k, n) bytes, written by gemm_bf16_amx_pack_b;
// gemm_bf16_amx_packed then computes C = alpha A op(B) + beta C (A [m, k] row-major, stride lda),
// bit for bit gemm_bf16_amx(false, trans_b, ...).
int64_t gemm_bf16_amx_packed_b_bytes(int64_t k, int64_t n);
void gemm_bf16_amx_pack_b(bool trans_b, int64_t k, int64_t n, const uint16_t* b, int64_t ldb, void* packed);
// B in f32, rounded to bf16 as it is packed: the same packing as of B rounded first.
void gemm_bf16_amx_pack_b(bool trans_b, int64_t k, int64_t n, const float* b, int64_t ldb, void* packed);
void gemm_bf16_amx_packed(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda,
                          const void* packed, float beta, float* c, int64_t ldc);

// Loads the tile configuration both this kernel and the peak measurement (peak.cpp) use: palette
// 1, tiles 0-7 each 16 rows x 64 bytes. Call on the thread that runs tile instructions, after
// amx_tiles_permitted().
void amx_load_tile_config();

}  // namespace titan::kernels
