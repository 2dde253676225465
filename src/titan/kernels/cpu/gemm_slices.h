// What titan's GEMM kernels (gemm_bf16_amx.cpp, gemm_bf16_avx512.cpp, gemm_bf16_avx2.cpp) share
// around their loop nests: C = beta C when k is 0, the split of the product into one slice per
// thread, and each thread's packing buffers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "titan/core/parallel.h"

namespace titan::kernels {

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// kAlign-byte aligned elements of T, grown as needed and never shrunk.
template <class T, size_t kAlign>
struct PackBuffer {
  std::vector<T> storage;
  T* get(int64_t count) {
    const size_t need = static_cast<size_t>(count) + kAlign / sizeof(T);
    if (storage.size() < need) storage.assign(need, T{});
    auto p = reinterpret_cast<uintptr_t>(storage.data());
    return reinterpret_cast<T*>((p + kAlign - 1) & ~uintptr_t{kAlign - 1});
  }
};

// The calling thread's buffer for packing op(A) (kOperand 'A') or op(B) ('B'), reused across calls
// (a thread runs one product at a time).
template <class T, size_t kAlign, char kOperand>
PackBuffer<T, kAlign>& thread_pack_buffer() {
  static thread_local PackBuffer<T, kAlign> buffer;
  return buffer;
}

// C[m, n] = beta C (beta == 0: C not read), the product of an empty reduction.
inline void scale_c(int64_t m, int64_t n, float beta, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
  }
}

// Threads split the larger of M and N into equal runs of whole register tiles (mr rows or nr
// columns) and each runs its slice alone: fn(i0, i1, j0, j1) computes C[i0:i1, j0:j1]. Nothing is
// shared between slices and no barrier separates k blocks; each slice packs what it reads, so the
// operand along the unsplit (smaller) dimension is packed once per thread. A first version packed
// op(B)'s block once for all threads and handed out work items from it: with two threads it ran
// at 80% or 90% of the peak from one process to the next (one thread held 90%), and took two
// barriers per k block (docs/performance.md (y)).
template <class Fn>
void for_each_thread_slice(int64_t m, int64_t n, int64_t mr, int64_t nr, Fn&& fn) {
  const bool split_columns = n >= m;
  const int64_t tile = split_columns ? nr : mr, extent = split_columns ? n : m;
  const int64_t units = ceil_div(extent, tile);
  const int64_t parts = std::min<int64_t>(num_threads(), units);
  parallel_for(parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t begin = units * p / parts * tile, end = std::min(units * (p + 1) / parts * tile, extent);
      if (split_columns) {
        fn(int64_t{0}, m, begin, end);
      } else {
        fn(begin, end, int64_t{0}, n);
      }
    }
  });
}

// The whole product C = alpha op(A) op(B) + beta C (gemm.h's contract) as one_thread(...) calls on
// the slices above, with m, n, a, b and c narrowed to each slice; empty products handled here.
template <class A, class B, class OneThread>
void gemm_in_slices(int64_t mr, int64_t nr, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const A* a, int64_t lda, const B* b, int64_t ldb, float beta, float* c, int64_t ldc,
                    OneThread&& one_thread) {
  if (m == 0 || n == 0) return;
  if (k == 0) return scale_c(m, n, beta, c, ldc);
  for_each_thread_slice(m, n, mr, nr, [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    // op(A)'s rows are A's columns when trans_a; op(B)'s columns are B's rows when trans_b.
    one_thread(trans_a, trans_b, i1 - i0, j1 - j0, k, alpha, a + (trans_a ? i0 : i0 * lda), lda,
               b + (trans_b ? j0 * ldb : j0), ldb, beta, c + i0 * ldc + j0, ldc);
  });
}

}  // namespace titan::kernels
