// Sum of squares of n f32 values in fp64, in the order ops/elementwise/elementwise.h fixes:
// element i goes into acc[i % 8] (in index order), and the result is
// ((acc0 + acc4) + (acc1 + acc5)) + ((acc2 + acc6) + (acc3 + acc7)). Single-threaded over one
// range; callers cut large tensors into fixed chunks (ops sum_squares, multi_sum_squares).
#pragma once

#include <cstdint>

namespace titan::kernels {

double sum_squares_f32(const float* x, int64_t n);

}  // namespace titan::kernels
