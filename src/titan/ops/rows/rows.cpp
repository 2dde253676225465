// Contract checks, tables and dispatch of the row moves.
#include "titan/ops/rows/rows.h"

#include <string>
#include <vector>

#include "titan/ops/builtin.h"

namespace titan::ops {

static std::string found(const Tensor& t) {
  return t.defined() ? t.describe() + " on " + device_name(t.device()) + (t.is_contiguous() ? "" : ", non-contiguous")
                     : std::string("an undefined tensor");
}

static bool rows_f32(const Tensor& t) {
  return t.defined() && t.ndim() == 2 && t.dtype() == DType::f32 && t.is_contiguous();
}

static void check_rows_f32(const char* op, const char* what, const Tensor& t) {
  TITAN_CHECK(rows_f32(t), "[", op, "] ", what, ": expected a contiguous f32 [rows, D] tensor, got ", found(t),
              ". HINT: reshape to 2-D rows and call contiguous() first");
}

void check_rows_gather(const Tensor& x_ND, const Tensor& index_M, const Tensor& y_MD) {
  check_rows_f32("rows_gather", "x_ND", x_ND);
  check_rows_f32("rows_gather", "y_MD", y_MD);
  TITAN_CHECK(index_M.defined() && index_M.ndim() == 1 && index_M.is_contiguous() &&
                  (index_M.dtype() == DType::i32 || index_M.dtype() == DType::i64) &&
                  index_M.numel() == y_MD.size(0) && index_M.device() == x_ND.device(),
              "[rows_gather] index_M: expected a contiguous i32 or i64 [", y_MD.size(0), "] (one per row of y) on ",
              device_name(x_ND.device()), ", got ", found(index_M), ". HINT: one source row per output row");
  TITAN_CHECK(y_MD.size(1) == x_ND.size(1) && y_MD.device() == x_ND.device(), "[rows_gather] y_MD: expected rows of ",
              x_ND.size(1), " on ", device_name(x_ND.device()), " (those of x_ND ", found(x_ND), "), got ", found(y_MD),
              ". HINT: x and y rows have the same width");
}

void check_rows_strided(const Tensor& x_ND, int64_t start, int64_t step, const Tensor& y_MD) {
  check_rows_f32("rows_strided", "x_ND", x_ND);
  check_rows_f32("rows_strided", "y_MD", y_MD);
  const int64_t m = y_MD.size(0), n = x_ND.size(0);
  TITAN_CHECK(y_MD.size(1) == x_ND.size(1) && y_MD.device() == x_ND.device(),
              "[rows_strided] y_MD: expected rows of ", x_ND.size(1), " (those of x_ND ", found(x_ND), "), got ",
              found(y_MD), ". HINT: x and y rows have the same width");
  TITAN_CHECK(start >= 0 && step >= 0 && (m == 0 || start + (m - 1) * step < n), "[rows_strided] rows ", start,
              ", ", start, " + ", step, ", ... (", m, " of them): expected every row below ", n,
              " (the rows of x_ND). HINT: start + (M - 1) * step must be a row of x");
}

void check_rows_mask(const Tensor& mask_N, const Tensor& x_ND) {
  check_rows_f32("rows_mask", "x_ND", x_ND);
  TITAN_CHECK(mask_N.defined() && mask_N.dtype() == DType::i32 && mask_N.is_contiguous() &&
                  mask_N.numel() == x_ND.size(0) && mask_N.device() == x_ND.device(),
              "[rows_mask] mask_N: expected a contiguous i32 [", x_ND.size(0), "] (one per row of x) on ",
              device_name(x_ND.device()), ", got ", found(mask_N), ". HINT: one flag per row");
}

// Defined with the other registrations in ops/builtin.cpp (the explicit list).
void register_builtin_rows_gather(OpTable<RowsGatherImpl>& table);
void register_builtin_rows_strided(OpTable<RowsStridedImpl>& table);
void register_builtin_rows_mask(OpTable<RowsMaskImpl>& table);

OpTable<RowsGatherImpl>& rows_gather_table() {
  return builtin_table<RowsGatherImpl>("rows_gather", register_builtin_rows_gather);
}
OpTable<RowsStridedImpl>& rows_strided_table() {
  return builtin_table<RowsStridedImpl>("rows_strided", register_builtin_rows_strided);
}
OpTable<RowsMaskImpl>& rows_mask_table() { return builtin_table<RowsMaskImpl>("rows_mask", register_builtin_rows_mask); }

void rows_gather_forward(const Tensor& x_ND, const Tensor& index_M, Tensor& y_MD) {
  OpTimer timer("rows_gather_forward");
  check_rows_gather(x_ND, index_M, y_MD);
  rows_gather_table().select(x_ND.device(), x_ND).forward(x_ND, index_M, y_MD);
}

void rows_gather_backward(const Tensor& dy_MD, const Tensor& index_M, Tensor& dx_ND) {
  OpTimer timer("rows_gather_backward");
  check_rows_gather(dx_ND, index_M, dy_MD);
  rows_gather_table().select(dx_ND.device(), dx_ND).backward(dy_MD, index_M, dx_ND);
}

void rows_transpose(const Tensor& x_ND, int64_t a, int64_t b, Tensor& y_ND) {
  TITAN_CHECK(a >= 0 && b >= 0 && x_ND.ndim() == 2 && x_ND.size(0) == a * b, "[rows_transpose] x ", x_ND.describe(),
              " is not an [", a, ", ", b, "] grid of rows");
  std::vector<int64_t> index(static_cast<size_t>(a * b));
  for (int64_t j = 0; j < b; ++j) {
    for (int64_t i = 0; i < a; ++i) index[static_cast<size_t>(j * a + i)] = i * b + j;
  }
  rows_gather_forward(x_ND, Tensor::wrap(index.data(), {a * b}, DType::i64, nullptr), y_ND);
}

void rows_strided_forward(const Tensor& x_ND, int64_t start, int64_t step, Tensor& y_MD) {
  OpTimer timer("rows_strided_forward");
  check_rows_strided(x_ND, start, step, y_MD);
  rows_strided_table().select(x_ND.device(), x_ND).forward(x_ND, start, step, y_MD);
}

void rows_mask(const Tensor& mask_N, Tensor& x_ND) {
  OpTimer timer("rows_mask_forward");
  check_rows_mask(mask_N, x_ND);
  rows_mask_table().select(x_ND.device(), mask_N, x_ND).forward(mask_N, x_ND);
}

}  // namespace titan::ops
