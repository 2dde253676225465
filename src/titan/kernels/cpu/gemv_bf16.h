// Matrix-vector products on bf16 operands for few rows (decode: one token per sequence):
//   y[M, N] = x[M, K] w[N, K]^T (+ y when accumulate), M small (<= kGemvMaxRows), f32 y.
// Decode is bound by reading w once per token, so this streams w strictly in memory order (one
// row of w at a time against every row of x, the x rows staying in L1; a software prefetch 4 KiB
// ahead) with AVX-512-BF16 dot products (vdpbf16ps: bf16 pairs multiplied exactly and accumulated
// in f32, as oneDNN's bf16 matmul does), threads splitting N. oneDNN's matmul at M = 1 read the
// tied head at about half this kernel's bandwidth on Zen 5 (docs/performance.md (l)).
#pragma once

#include <cstdint>

namespace titan::kernels {

inline constexpr int64_t kGemvMaxRows = 4;

// True where the CPU has AVX-512-BF16 (the only path this kernel has; callers use gemm_bf16
// elsewhere).
bool gemv_bf16_supported();

// x [m, k] (row stride k), w [n, k] (row stride k), y [m, n] (row stride n); m <= kGemvMaxRows.
void gemv_bf16(int64_t m, int64_t n, int64_t k, const uint16_t* x, const uint16_t* w, bool accumulate, float* y);

}  // namespace titan::kernels
