// A trainable tensor with its gradient and its fully-qualified name (FQN), which mirrors the
// module tree ("layers.3.attention.wq.weight"). Gradients accumulate (+=) across backward calls
// until zero_grad. A frozen parameter (a LoRA base: `trainable` false) has no gradient and no
// optimizer state, and may hold no f32 master at all (bf16 only, in `compute`).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "titan/core/tensor.h"
#include "titan/ops/quantize/quantize.h"

namespace titan::nn {

struct Parameter {
  std::string fqn;
  Tensor value;  // the master weight, f32
  Tensor grad;   // same shape, f32; allocated with the value
  // Mixed precision (training.mixed_precision_param): the dtype modules compute with. bf16: every
  // parameter is rounded to bf16 at use (FSDP2's param_dtype), GEMMs take it as bf16 and the
  // RMSNorm weights are widened back (their math stays f32).
  DType compute_dtype = DType::f32;
  // The bf16 compute copy where one exists (FSDP gathers bf16 shards into it); otherwise
  // for_compute() rounds `value` at use.
  Tensor compute;

  // false: frozen. grad stays undefined; ops skip the weight gradient where they can, or write it
  // into grad_sink()'s scratch.
  bool trainable = true;

  // A frozen linear weight stored quantized (lora.base_quantization, QLoRA): its codes and scales
  // (ops/quantize.h) and shape; no `value` and no `compute`. for_compute() dequantizes it into a
  // transient tensor of compute_dtype at each use.
  Tensor codes, scales;
  ops::QuantKind quant_kind = ops::QuantKind::nf4;
  Shape quant_shape;
  bool quantized() const { return codes.defined(); }

  // A zero parameter: f32 value and gradient, or, inside a FrozenParameterScope, a frozen one
  // stored in the scope's dtype (bf16: `compute` only, compute_dtype bf16, no `value`), or
  // quantized where the scope quantizes and `quantizable` (a Linear's weight) says it may be.
  void init(std::string name, const Shape& shape, Device device, bool quantizable = false);
  // Always a trainable f32 parameter (LoRA adapters built inside a FrozenParameterScope).
  void init_trainable(std::string name, const Shape& shape, Device device);
  bool defined() const { return value.defined() || compute.defined() || quantized(); }
  Shape shape() const { return quantized() ? quant_shape : data().shape(); }
  // Sets the weight from a whole tensor of its shape (f32 or bf16): copied into `value` or
  // `compute`, or quantized.
  void assign(const Tensor& w);
  // The weight as an f32 tensor: `value`, or `compute` widened, or the quantized weight decoded.
  Tensor to_f32() const;
  // A quantized weight decoded into a new tensor of `dtype` (f32 or bf16).
  Tensor decoded(DType dtype) const;
  // Where the weight lives: `value`, or `compute` for a frozen parameter stored in bf16 only.
  // Loading writes here (copy_from converts).
  Tensor& data() { return value.defined() ? value : compute; }
  const Tensor& data() const { return value.defined() ? value : compute; }
  // What a backward accumulates this parameter's gradient into: `grad`, or for a frozen parameter
  // a zeroed scratch that is dropped after the call (for ops that cannot skip a weight gradient).
  Tensor grad_sink() const { return grad.defined() ? grad : Tensor::zeros(shape()); }
  // The parameter in compute_dtype: `value` (f32), or `compute` / `value` rounded to bf16.
  Tensor for_compute() const;
  // The weight as the GEMM ops (linear, lm_head_xent) take it: under bf16 compute with the f32
  // master alone (no FSDP-gathered or frozen bf16 copy, not quantized) the master itself, which
  // the ops round to bf16 as they read it (for_compute()'s values without its bf16 copy); else
  // for_compute().
  Tensor for_gemm() const;
  // The compute value widened to f32 (ops whose math stays f32: RMSNorm, the router, the embedding
  // lookup): `value` itself in f32 mode, the bf16-rounded weight otherwise.
  Tensor for_compute_f32() const;
};

using ParameterList = std::vector<Parameter*>;

// The trainable parameters of `params`, in order.
ParameterList trainable(const ParameterList& params);

// While alive, Parameter::init on this thread builds frozen parameters stored in `dtype` (f32 or
// bf16), so a frozen base is never allocated in f32 nor given a gradient: building a LoRA model.
// With `quant`, the quantizable ones (linear weights) are stored quantized instead (QLoRA), and
// computed with in `dtype`.
class FrozenParameterScope {
 public:
  explicit FrozenParameterScope(DType dtype, std::optional<ops::QuantKind> quant = std::nullopt);
  ~FrozenParameterScope();
  FrozenParameterScope(const FrozenParameterScope&) = delete;
  FrozenParameterScope& operator=(const FrozenParameterScope&) = delete;

 private:
  const FrozenParameterScope* previous_;
  DType dtype_;
  std::optional<ops::QuantKind> quant_;
  friend struct Parameter;
};

// Where modules allocate their parameters: the default device (core/tensor.h), the host unless a
// meta run builds the model. Weights are initialised and loaded on the host (init, HF import,
// checkpoints), and activations follow their inputs' device; a device backend moves the model after
// it is built (CUDA: not yet).
inline Device parameter_device() { return default_device(); }

// Adds a[i] += b[i]; used where two gradient paths meet (residuals, q/k/v inputs). The op
// ops::accumulate (ops/elementwise/elementwise.h: f32, same numel, contiguous).
void add_inplace(Tensor& a, const Tensor& b);

}  // namespace titan::nn
