#include "titan/kernels/cpu/sum_squares.h"

#include "titan/kernels/cpu/simd.h"

namespace titan::kernels {

// acc[k] takes elements k, k + 8, k + 16, ... (the whole blocks of 8, then the tail from k = 0):
// element i always lands in acc[i % 8], the contract's order. The inner loop over k is what GCC
// turns into fp64 vector lanes; the lanes never mix until the final fixed tree. The square of an
// f32 is exact in fp64, so FMA contraction gives the same bits.
TITAN_SIMD_KERNEL(double, sum_squares_f32, (const float* x, int64_t n),
                  (x, n)) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(x[i + k]) * x[i + k];
  }
  for (int k = 0; i < n; ++i, ++k) acc[k] += static_cast<double>(x[i]) * x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace titan::kernels
