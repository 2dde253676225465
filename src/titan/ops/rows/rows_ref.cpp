// Scalar references of the row moves: one element at a time, readable as rows.h's formulas.
// An index outside x is an error here (the oracle), as in the kernels.
#include <algorithm>

#include "titan/core/error.h"
#include "titan/ops/rows/rows.h"

namespace titan::ops {
namespace ref {

template <class I>
static int64_t row_of(const I* index, int64_t m, int64_t n) {
  const auto r = static_cast<int64_t>(index[m]);
  TITAN_CHECK(r >= 0 && r < n, "[rows_gather] index_M[", m, "] = ", r, ": expected a row in [0, ", n,
              "). HINT: every index names a row of x");
  return r;
}

template <class T, class I>
void rows_gather_forward(int64_t m, int64_t d, const T* x, const I* index, T* y) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < d; ++j) y[i * d + j] = x[static_cast<int64_t>(index[i]) * d + j];
  }
}

template <class T, class I>
void rows_gather_backward(int64_t m, int64_t d, const T* dy, const I* index, T* dx) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < d; ++j) dx[static_cast<int64_t>(index[i]) * d + j] = dy[i * d + j];
  }
}

template void rows_gather_forward<float, int32_t>(int64_t, int64_t, const float*, const int32_t*, float*);
template void rows_gather_forward<float, int64_t>(int64_t, int64_t, const float*, const int64_t*, float*);
template void rows_gather_forward<double, int32_t>(int64_t, int64_t, const double*, const int32_t*, double*);
template void rows_gather_backward<float, int32_t>(int64_t, int64_t, const float*, const int32_t*, float*);
template void rows_gather_backward<float, int64_t>(int64_t, int64_t, const float*, const int64_t*, float*);
template void rows_gather_backward<double, int32_t>(int64_t, int64_t, const double*, const int32_t*, double*);

// Range check of every index (before any row moves).
template <class I>
static void check_range(int64_t m, const I* index, int64_t n) {
  for (int64_t i = 0; i < m; ++i) row_of(index, i, n);
}

}  // namespace ref

static void rows_gather_ref(const Tensor& x_ND, const Tensor& index_M, Tensor& y_MD) {
  const int64_t m = index_M.numel(), d = x_ND.size(1);
  if (index_M.dtype() == DType::i32) {
    ref::check_range(m, index_M.data<int32_t>(), x_ND.size(0));
    ref::rows_gather_forward(m, d, x_ND.data<float>(), index_M.data<int32_t>(), y_MD.data<float>());
  } else {
    ref::check_range(m, index_M.data<int64_t>(), x_ND.size(0));
    ref::rows_gather_forward(m, d, x_ND.data<float>(), index_M.data<int64_t>(), y_MD.data<float>());
  }
}

static void rows_gather_backward_ref(const Tensor& dy_MD, const Tensor& index_M, Tensor& dx_ND) {
  const int64_t m = index_M.numel(), d = dx_ND.size(1);
  if (index_M.dtype() == DType::i32) {
    ref::check_range(m, index_M.data<int32_t>(), dx_ND.size(0));
    ref::rows_gather_backward(m, d, dy_MD.data<float>(), index_M.data<int32_t>(), dx_ND.data<float>());
  } else {
    ref::check_range(m, index_M.data<int64_t>(), dx_ND.size(0));
    ref::rows_gather_backward(m, d, dy_MD.data<float>(), index_M.data<int64_t>(), dx_ND.data<float>());
  }
}

static void rows_strided_ref(const Tensor& x_ND, int64_t start, int64_t step, Tensor& y_MD) {
  const int64_t m = y_MD.size(0), d = x_ND.size(1);
  const float* x = x_ND.data<float>();
  float* y = y_MD.data<float>();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < d; ++j) y[i * d + j] = x[(start + i * step) * d + j];
  }
}

static void rows_mask_ref(const Tensor& mask_N, Tensor& x_ND) {
  const int64_t n = x_ND.size(0), d = x_ND.size(1);
  const int32_t* mask = mask_N.data<int32_t>();
  float* x = x_ND.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      if (mask[i] != 0) x[i * d + j] = 0.0f;
    }
  }
}

RowsGatherImpl rows_gather_impl_ref() {
  return {"rows_gather_ref", Device::cpu, nullptr, rows_gather_ref, rows_gather_backward_ref};
}
RowsStridedImpl rows_strided_impl_ref() { return {"rows_strided_ref", Device::cpu, nullptr, rows_strided_ref, nullptr}; }
RowsMaskImpl rows_mask_impl_ref() { return {"rows_mask_ref", Device::cpu, nullptr, rows_mask_ref, nullptr}; }

}  // namespace titan::ops
