// The GEMM seam. Every matrix product in titan goes through here, so the library behind it
// (chosen by measurement, see docs/performance.md) can change in one place.
//
// Row-major: C[M, N] = alpha * op(A) op(B) + beta * C, where op(A) is [M, K] (A stored [K, M]
// when trans_a) and op(B) is [K, N] (B stored [N, K] when trans_b). lda/ldb/ldc are row strides.
#pragma once

#include <cstdint>

#include "titan/core/dtype.h"

namespace titan::kernels {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// bf16 A and B, f32 C (alpha, beta, ld* as gemm()); products are exact in f32 and accumulate in
// f32. With AMX: titan's AMX kernel (gemm_bf16_amx.h). With AVX-512-BF16 and no AMX: titan's own
// kernel (gemm_bf16_avx512.h) for products of 64 MFLOP and more, oneDNN's matmul for smaller ones.
// Elsewhere (no bf16 kernel in oneDNN's reach: AVX2, AVX-512 without BF16, a DNNL_MAX_CPU_ISA cap)
// emulated by titan's AVX2 FMA kernel (gemm_bf16_avx2.h), which widens A and B to f32 as it packs
// them: the same exact products, at the f32 FMA rate.
void gemm_bf16(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
               int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);
// gemm_bf16 with B in f32, rounded to bf16 (nearest even, core/dtype.h's f32_to_bf16) where it is
// read: bit for bit gemm_bf16 on B rounded first. titan's kernel rounds B block by block as it
// packs it, so no bf16 copy of B exists (gemm_bf16_rounds_b_while_packing); other paths round
// op(B) into a temporary first.
void gemm_bf16_round_b(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                       int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
// True where gemm_bf16_round_b runs products of 64 MFLOP and more on one of titan's kernels (no copy
// of B): the AMX one (at every size), the AVX-512-BF16 one, or the AVX2 one where gemm_bf16 is
// emulated (then at every size).
bool gemm_bf16_rounds_b_while_packing();
// gemm, gemm_bf16 or gemm_bf16_round_b by the operands' element types: A and B both f32, both
// bf16, or bf16 A with f32 B (rounded as read). For ops that hold their operands' dtypes at run
// time (linear, lm_head_xent).
void gemm_of(DType a_dtype, DType b_dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
             const void* a, int64_t lda, const void* b, int64_t ldb, float beta, float* c, int64_t ldc);
// gemm_bf16 under gemm's name, so code generic over the operand type (float, or uint16_t holding
// bf16: the attention kernel's tiles) calls one name and overloading picks the product.
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                 int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_bf16(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
// gemm_bf16 on oneDNN's matmul whatever the shape, or where oneDNN has no bf16 kernel the former
// emulation (A and B widened into f32 copies, then gemm()): for benchmarks that compare it with
// titan's kernels.
void gemm_bf16_onednn(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                      int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);
// Which kernel gemm_bf16 runs here, for the start-up log: "titan AMX kernel", "titan AVX-512-BF16
// kernel from 64 MFLOP, oneDNN bf16 matmul below", or "titan AVX2 FMA kernel (...)".
const char* gemm_bf16_backend_name();
// True where gemm_bf16 widens to f32 (no bf16 kernel in oneDNN for this CPU / DNNL_MAX_CPU_ISA):
// titan's AVX2 kernel then runs every bf16 product.
bool gemm_bf16_is_emulated();

// A B operand shared by many products whose A changes (the lm_head's weight across its token
// chunks), packed once into the kernel's layout where that gains: titan's AMX kernel, which
// otherwise packs op(B)'s blocks on every call (for the head's w^T, a 16 x 16 transpose per block).
// Elsewhere no packing: gemm_bf16_packed_b_bytes is 0 and the products read B as stored, bit for
// bit gemm_bf16.
//   bytes = gemm_bf16_packed_b_bytes(k, n);                     // 0: nothing to pack
//   gemm_bf16_pack_b(trans_b, k, n, b, ldb, packed);             // once, into `bytes` at `packed`
//   gemm_bf16_packed(m, n, k, alpha, a, lda, trans_b, b, ldb, packed, beta, c, ldc);  // C = alpha A op(B) + beta C
// A product through the packed B equals gemm_bf16's bit for bit. B must stay as it was packed (the
// packed copy is used where the kernel can, B itself where not). B may be f32, rounded to bf16 as
// it is packed (the head's f32 master weight: no bf16 copy of it): then bit for bit
// gemm_bf16_round_b.
int64_t gemm_bf16_packed_b_bytes(int64_t k, int64_t n);  // op(B)'s layout, however B is stored
void gemm_bf16_pack_b(bool trans_b, int64_t k, int64_t n, const uint16_t* b, int64_t ldb, void* packed);
void gemm_bf16_pack_b(bool trans_b, int64_t k, int64_t n, const float* b, int64_t ldb, void* packed);
void gemm_bf16_packed(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda, bool trans_b,
                      const uint16_t* b, int64_t ldb, const void* packed, float beta, float* c, int64_t ldc);
void gemm_bf16_packed(int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a, int64_t lda, bool trans_b,
                      const float* b, int64_t ldb, const void* packed, float beta, float* c, int64_t ldc);

// True where gemm_bf16 runs every product on titan's AMX kernel: the CPU has AMX-BF16, Linux granted
// the tile state, and oneDNN's effective ISA is avx512_core_amx (DNNL_MAX_CPU_ISA can cap it off).
bool gemm_bf16_uses_amx();

// Plain triple loop with f64 accumulation: the oracle for tests and the fallback reference.
void gemm_ref(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
              const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
              int64_t ldc);

// Human-readable name of the library behind gemm(), e.g. "oneDNN 2.6.3 (sgemm, avx512_core)".
const char* gemm_backend_name();

}  // namespace titan::kernels
