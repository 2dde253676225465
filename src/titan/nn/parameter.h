// A trainable tensor with its gradient and its fully-qualified name (FQN), which mirrors the
// module tree ("layers.3.attention.wq.weight"). Gradients accumulate (+=) across backward calls
// until zero_grad.
#pragma once

#include <string>
#include <vector>

#include "titan/core/tensor.h"

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

  void init(std::string name, const Shape& shape, Device device) {
    fqn = std::move(name);
    value = Tensor::zeros(shape, DType::f32, device);
    grad = Tensor::zeros(shape, DType::f32, device);
  }
  bool defined() const { return value.defined() || compute.defined(); }
  // The parameter in compute_dtype: `value` (f32), or `compute` / `value` rounded to bf16.
  Tensor for_compute() const;
  // The compute value widened to f32 (ops whose math stays f32: RMSNorm, the router, the embedding
  // lookup): `value` itself in f32 mode, the bf16-rounded weight otherwise.
  Tensor for_compute_f32() const;
};

using ParameterList = std::vector<Parameter*>;

// Where modules allocate their parameters. Weights are initialised and loaded on the host (init,
// HF import, checkpoints), and activations follow their inputs' device; a device backend moves the
// model after it is built (CUDA: not yet).
inline constexpr Device kParameterDevice = Device::cpu;

// Adds a[i] += b[i]; used where two gradient paths meet (residuals, q/k/v inputs). The op
// ops::accumulate (ops/elementwise/elementwise.h: f32, same numel, contiguous).
void add_inplace(Tensor& a, const Tensor& b);

}  // namespace titan::nn
