#include "titan/kernels/cpu/cast.h"

#include "titan/core/dtype.h"
#include "titan/kernels/cpu/simd.h"

namespace titan::kernels {

// Plain loops over core/dtype.h's conversions (so the same bits, NaN included), which GCC
// vectorizes per ISA level (TITAN_SIMD_KERNEL). They were 64-byte integer vectors once: without
// AVX-512 GCC 12 lowered the NaN test's select one lane at a time (performance.md (ab)).
TITAN_SIMD_KERNEL(void, cast_f32_to_bf16, (const float* src, uint16_t* dst, int64_t n),
                  (src, dst, n)) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

TITAN_SIMD_KERNEL(void, cast_bf16_to_f32, (const uint16_t* src, float* dst, int64_t n),
                  (src, dst, n)) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace titan::kernels
