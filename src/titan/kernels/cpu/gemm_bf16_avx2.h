// titan's bf16 GEMM for CPUs without a bf16 dot product in oneDNN's reach (AVX2 only, AVX-512
// without BF16, or a DNNL_MAX_CPU_ISA cap below bf16): the signature and contract of
// kernels::gemm_bf16. gemm_bf16 routes here where it would otherwise emulate (widen A and B into f32
// copies, then oneDNN's sgemm); it is called directly only by tests and benchmarks.
//
// Arithmetic: A and B are widened to f32 as they are packed (B in f32 is first rounded to bf16,
// nearest even, as core/dtype.h's f32_to_bf16), so every product of two bf16 values is exact in f32;
// each C element is then a sum over k by f32 FMAs in increasing k (rounded to nearest even). K is
// cut into blocks of 256 at fixed offsets; each block's partial sum is added to C (alpha-scaled; the
// first block also applies beta). The order depends only on k, never on the thread count or on how
// M and N are tiled, so results are bitwise reproducible.
#pragma once

#include <cstdint>

namespace titan::kernels {

void gemm_bf16_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                    int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);
// The same product with B in f32, rounded to bf16 block by block as it is packed: bit for bit the
// product with B rounded first, without a bf16 copy of B.
void gemm_bf16_avx2(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                    int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace titan::kernels
