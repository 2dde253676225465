#include "titan/nn/parameter.h"

#include "titan/ops/elementwise/elementwise.h"

namespace titan::nn {

namespace {
thread_local const FrozenParameterScope* frozen_scope = nullptr;  // the innermost one
}

FrozenParameterScope::FrozenParameterScope(DType dtype, std::optional<ops::QuantKind> quant)
    : previous_(frozen_scope), dtype_(dtype), quant_(quant) {
  TITAN_CHECK(dtype == DType::f32 || dtype == DType::bf16, "[nn] a frozen base is stored in f32 or bf16, not ",
              dtype_name(dtype));
  frozen_scope = this;
}

FrozenParameterScope::~FrozenParameterScope() { frozen_scope = previous_; }

void Parameter::init(std::string name, const Shape& shape, Device device, bool quantizable) {
  if (frozen_scope == nullptr) return init_trainable(std::move(name), shape, device);
  fqn = std::move(name);
  trainable = false;
  // gguf blocks (loaded from the file later) need rows of whole blocks: q8_0's 32 at least.
  const bool blocks_fit = frozen_scope->quant_ != ops::QuantKind::gguf || (shape.size() == 2 && shape[1] % 32 == 0);
  if (quantizable && frozen_scope->quant_ && shape.size() == 2 && blocks_fit) {
    quant_kind = *frozen_scope->quant_;
    quant_shape = shape;
    compute_dtype = frozen_scope->dtype_;
    codes = ops::quant_codes(quant_kind, shape, device);
    scales = ops::quant_scales(quant_kind, shape, device);
    return;
  }
  if (frozen_scope->dtype_ == DType::bf16) {
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

void Parameter::assign(const Tensor& w) {
  TITAN_CHECK(w.shape() == shape(), "[nn] ", fqn, ": assigning ", w.describe(), " to a parameter of shape ",
              shape_str(shape()));
  if (quantized()) {
    ops::quantize(quant_kind, w.is_contiguous() ? w : w.contiguous(), codes, scales);
  } else {
    data().copy_from(w);
  }
}

Tensor Parameter::decoded(DType dtype) const {
  Tensor out = Tensor::empty(quant_shape, dtype, codes.device());
  ops::dequantize(quant_kind, codes, scales, out);
  return out;
}

Tensor Parameter::to_f32() const {
  if (quantized()) return decoded(DType::f32);
  return data().dtype() == DType::f32 ? data() : data().to(DType::f32);
}

Tensor Parameter::for_gemm() const {
  const bool master_alone = compute_dtype == DType::bf16 && value.defined() && !compute.defined() && !quantized();
  return master_alone ? value : for_compute();
}

Tensor Parameter::for_compute() const {
  if (quantized()) return decoded(compute_dtype);  // at each use: one weight's transient copy
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
