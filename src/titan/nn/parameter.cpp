#include "titan/nn/parameter.h"

#include "titan/ops/elementwise/elementwise.h"

namespace titan::nn {

Tensor Parameter::for_compute() const {
  if (compute_dtype == DType::f32) return value;
  if (compute.defined()) return compute;
  return ops::cast_to(value, compute_dtype);
}

Tensor Parameter::for_compute_f32() const {
  if (compute_dtype == DType::f32) return value;
  return ops::cast_to(for_compute(), DType::f32);
}

void add_inplace(Tensor& a, const Tensor& b) { ops::accumulate(a, b); }

}  // namespace titan::nn
