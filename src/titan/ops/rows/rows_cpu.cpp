// The row moves on CPU: rows split over threads, each row one memcpy / memset (copies and zeros,
// so the split and the vector width do not change a bit). Indices are checked before any row
// moves, as in the reference.
#include <algorithm>
#include <cstring>

#include "titan/core/error.h"
#include "titan/core/parallel.h"
#include "titan/ops/rows/rows.h"

namespace titan::ops {

// Floats per thread chunk at least: below this the fork costs more than the copies.
constexpr int64_t kRowsGrain = 1 << 15;

static int64_t grain_rows(int64_t d) { return std::max<int64_t>(1, kRowsGrain / std::max<int64_t>(1, d)); }

template <class I>
static void check_range(const I* index, int64_t m, int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    const auto r = static_cast<int64_t>(index[i]);
    TITAN_CHECK(r >= 0 && r < n, "[rows_gather] index_M[", i, "] = ", r, ": expected a row in [0, ", n,
                "). HINT: every index names a row of x");
  }
}

// to[row_to(i)] = from[row_from(i)] for i in [0, m), rows of d floats.
template <class To, class From>
static void copy_rows(int64_t m, int64_t d, const float* from, float* to, To row_to, From row_from) {
  const auto bytes = static_cast<size_t>(d) * sizeof(float);
  parallel_for(m, grain_rows(d), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) std::memcpy(to + row_to(i) * d, from + row_from(i) * d, bytes);
  });
}

template <class I>
static void gather(const Tensor& x_ND, const I* index, Tensor& y_MD) {
  const int64_t m = y_MD.size(0);
  check_range(index, m, x_ND.size(0));
  copy_rows(m, x_ND.size(1), x_ND.data<float>(), y_MD.data<float>(), [](int64_t i) { return i; },
            [index](int64_t i) { return static_cast<int64_t>(index[i]); });
}

template <class I>
static void scatter(const Tensor& dy_MD, const I* index, Tensor& dx_ND) {
  const int64_t m = dy_MD.size(0);
  check_range(index, m, dx_ND.size(0));
  copy_rows(m, dx_ND.size(1), dy_MD.data<float>(), dx_ND.data<float>(),
            [index](int64_t i) { return static_cast<int64_t>(index[i]); }, [](int64_t i) { return i; });
}

static void rows_gather_cpu(const Tensor& x_ND, const Tensor& index_M, Tensor& y_MD) {
  if (index_M.dtype() == DType::i32) return gather(x_ND, index_M.data<int32_t>(), y_MD);
  gather(x_ND, index_M.data<int64_t>(), y_MD);
}

static void rows_gather_backward_cpu(const Tensor& dy_MD, const Tensor& index_M, Tensor& dx_ND) {
  if (index_M.dtype() == DType::i32) return scatter(dy_MD, index_M.data<int32_t>(), dx_ND);
  scatter(dy_MD, index_M.data<int64_t>(), dx_ND);
}

static void rows_strided_cpu(const Tensor& x_ND, int64_t start, int64_t step, Tensor& y_MD) {
  copy_rows(y_MD.size(0), x_ND.size(1), x_ND.data<float>(), y_MD.data<float>(), [](int64_t i) { return i; },
            [start, step](int64_t i) { return start + i * step; });
}

static void rows_mask_cpu(const Tensor& mask_N, Tensor& x_ND) {
  const int64_t d = x_ND.size(1);
  const int32_t* mask = mask_N.data<int32_t>();
  float* x = x_ND.data<float>();
  parallel_for(x_ND.size(0), grain_rows(d), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (mask[i] != 0) std::fill(x + i * d, x + (i + 1) * d, 0.0f);
    }
  });
}

RowsGatherImpl rows_gather_impl_cpu() {
  return {"rows_gather_cpu", Device::cpu, nullptr, rows_gather_cpu, rows_gather_backward_cpu};
}
RowsStridedImpl rows_strided_impl_cpu() { return {"rows_strided_cpu", Device::cpu, nullptr, rows_strided_cpu, nullptr}; }
RowsMaskImpl rows_mask_impl_cpu() { return {"rows_mask_cpu", Device::cpu, nullptr, rows_mask_cpu, nullptr}; }

}  // namespace titan::ops
