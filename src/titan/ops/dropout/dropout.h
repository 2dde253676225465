// Dropout with a counter-based mask (PEFT's lora_dropout on an adapter's input): element e of x is
// kept with probability 1 - p and scaled by 1 / (1 - p), else zeroed,
//   y[e] = keep(e) ? x[e] * s : 0,   keep(e) = Rng(seed, stream).uniform(e) >= p,   s = 1 / (1 - p)
// Shapes: x (any shape; contiguous f32) -> y of the same shape (written =). The mask is a function
// of (seed, stream, e) alone: the backward draws it again (nothing is saved), and every thread
// count and ISA level draws the same one. s is rounded to f32 once (fl(1 / (1 - p))).
// Backward: dx = dy masked and scaled the same way (y is linear in x), written (=).
#pragma once

#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct DropoutArgs {
  double p = 0.0;  // the probability of zeroing an element, in [0, 1)
  uint64_t seed = 0;
  uint64_t stream = 0;
};

// Throws naming the tensor (or p) and what it expected.
void check_dropout(const Tensor& x, const DropoutArgs& args);

void dropout_forward(const Tensor& x, const DropoutArgs& args, Tensor& y);
void dropout_backward(const Tensor& dy, const DropoutArgs& args, Tensor& dx);

struct DropoutTag;
using DropoutImpl = OpImpl<bool (*)(const Tensor& x), void (*)(const Tensor&, const DropoutArgs&, Tensor&),
                           void (*)(const Tensor&, const DropoutArgs&, Tensor&), DropoutTag>;
OpTable<DropoutImpl>& dropout_table();
DropoutImpl dropout_impl_ref();
DropoutImpl dropout_impl_cpu();

namespace ref {
// y[e] = keep(e) ? x[e] / (1 - p) : 0 over n elements (the backward is the same map on dy).
template <class T>
void dropout(int64_t n, double p, uint64_t seed, uint64_t stream, const T* x, T* y);
}  // namespace ref

}  // namespace titan::ops
