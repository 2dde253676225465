// Scalar math the op references and the scalar paths of CPU kernels share (vector kernels have
// their own, in kernels/cpu/simd.h).
#pragma once

#include <cmath>

namespace titan::ops {

// sigmoid through e = exp(-|z|) in (0, 1]: exp never overflows, and for z < 0 the result e / (1 + e)
// keeps its relative precision (1 - 1 / (1 + e) would cancel): swiglu.md.
template <class T>
inline T sigmoid(T z) {
  const T e = std::exp(-std::fabs(z));
  return z >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
}

}  // namespace titan::ops
