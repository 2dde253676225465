// Reference for the column block: element by element.
#include "titan/ops/columns/columns.h"

namespace titan::ops {

static void forward_ref(const Tensor& x, int64_t start, Tensor& y) {
  const int64_t n = y.size(0), c = y.size(1), f = x.size(1);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) y.data<float>()[i * c + j] = x.data<float>()[i * f + start + j];
  }
}

static void backward_ref(const Tensor& dy, int64_t start, Tensor& dx) {
  const int64_t n = dy.size(0), c = dy.size(1), f = dx.size(1);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) dx.data<float>()[i * f + start + j] = dy.data<float>()[i * c + j];
  }
}

ColumnsImpl columns_impl_ref() { return {"columns_ref", Device::cpu, nullptr, forward_ref, backward_ref}; }

}  // namespace titan::ops
