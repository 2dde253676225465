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
  Tensor value;
  Tensor grad;  // same shape, f32; allocated with the value

  void init(std::string name, const Shape& shape, Device device) {
    fqn = std::move(name);
    value = Tensor::zeros(shape, DType::f32, device);
    grad = Tensor::zeros(shape, DType::f32, device);
  }
  bool defined() const { return value.defined(); }
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
