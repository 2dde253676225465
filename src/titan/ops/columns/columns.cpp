// Contract checks and dispatch.
#include "titan/ops/columns/columns.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

void check_columns(const Tensor& x_NF, int64_t start, const Tensor& y_NC) {
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"x", &x_NF}, {"y", &y_NC}}) {
    TITAN_CHECK(t->ndim() == 2 && t->dtype() == DType::f32 && t->is_contiguous(), "[columns] ", name,
                ": expected a contiguous f32 [rows, columns] tensor, got ", t->describe());
  }
  TITAN_CHECK(y_NC.size(0) == x_NF.size(0) && start >= 0 && start + y_NC.size(1) <= x_NF.size(1),
              "[columns] columns [", start, ", ", start + y_NC.size(1), ") of ", y_NC.size(0), " rows do not fit in ",
              x_NF.describe());
}

OpTable<ColumnsImpl>& columns_table() { return builtin_table<ColumnsImpl>("columns", register_builtin_columns); }

void columns_forward(const Tensor& x_NF, int64_t start, Tensor& y_NC) {
  OpTimer timer("columns_forward");
  check_columns(x_NF, start, y_NC);
  columns_table().select(x_NF.device(), x_NF).forward(x_NF, start, y_NC);
}

void columns_backward(const Tensor& dy_NC, int64_t start, Tensor& dx_NF) {
  OpTimer timer("columns_backward");
  check_columns(dx_NF, start, dy_NC);
  columns_table().select(dx_NF.device(), dx_NF).backward(dy_NC, start, dx_NF);
}

}  // namespace titan::ops
