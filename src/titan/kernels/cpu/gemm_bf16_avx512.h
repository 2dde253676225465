// titan's own bf16 GEMM for CPUs with AVX-512-BF16 (vdpbf16ps) and no AMX: the signature and
// contract of kernels::gemm_bf16 (bf16 A and B, f32 C, row-major, alpha / beta, any transposes and
// strides). gemm_bf16 routes here where this kernel measured faster than oneDNN 2.6's bf16 matmul
// (docs/performance.md (t)); it is called directly only by tests and benchmarks.
//
// Arithmetic: each C element is a sum over k in pairs, (a[k] b[k] + a[k+1] b[k+1]) added to an f32
// accumulator by one vdpbf16ps lane (products exact, adds rounded to nearest even, denormal
// inputs and outputs flushed to zero, as the instruction defines; an odd k is padded with a zero
// pair). K is cut into blocks of kKc at fixed offsets; each block's partial sum is added to C
// (alpha-scaled; the first block also applies beta). The order depends only on k, never on the
// thread count or on how M and N are tiled, so results are bitwise reproducible.
#pragma once

#include <cstdint>

namespace titan::kernels {

// True where the CPU has AVX-512 F/BW/DQ/VL and BF16.
bool gemm_bf16_avx512_supported();

void gemm_bf16_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                      int64_t lda, const uint16_t* b, int64_t ldb, float beta, float* c, int64_t ldc);
// The same product with B in f32, rounded to bf16 (nearest even, as core/dtype.h's f32_to_bf16)
// block by block as it is packed: bit for bit the product with B rounded first, without a bf16
// copy of B.
void gemm_bf16_avx512(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const uint16_t* a,
                      int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace titan::kernels
