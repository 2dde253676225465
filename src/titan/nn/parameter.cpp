#include "titan/nn/parameter.h"

#include "titan/ops/elementwise/elementwise.h"

namespace titan::nn {

namespace {
thread_local const DType* frozen_dtype = nullptr;  // the innermost FrozenParameterScope's
}

FrozenParameterScope::FrozenParameterScope(DType dtype) : previous_(frozen_dtype), dtype_(dtype) {
  TITAN_CHECK(dtype == DType::f32 || dtype == DType::bf16, "[nn] a frozen base is stored in f32 or bf16, not ",
              dtype_name(dtype));
  frozen_dtype = &dtype_;
}

FrozenParameterScope::~FrozenParameterScope() { frozen_dtype = previous_; }

void Parameter::init(std::string name, const Shape& shape, Device device) {
  if (frozen_dtype == nullptr) return init_trainable(std::move(name), shape, device);
  fqn = std::move(name);
  trainable = false;
  if (*frozen_dtype == DType::bf16) {
    compute_dtype = DType::bf16;
    compute = Tensor::zeros(shape, DType::bf16, device);
  } else {
    value = Tensor::zeros(shape, DType::f32, device);
  }
}

void Parameter::init_trainable(std::string name, const Shape& shape, Device device) {
  fqn = std::move(name);
  trainable = true;
  value = Tensor::zeros(shape, DType::f32, device);
  grad = Tensor::zeros(shape, DType::f32, device);
}

ParameterList trainable(const ParameterList& params) {
  ParameterList out;
  for (Parameter* p : params) {
    if (p->trainable) out.push_back(p);
  }
  return out;
}

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
