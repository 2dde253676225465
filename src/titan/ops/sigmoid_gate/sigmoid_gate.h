// A sigmoid gate on x (Qwen3.5's output-gated attention, attn_output * sigmoid(gate); and its
// MoE shared expert, sigmoid(shared_expert_gate(x)) * shared_expert(x), one gate per row):
//   y[n, f] = x[n, f] * s[n, f / (F / G)],   s = sigmoid(gate)
// Shapes: N rows, F features of x, G gates per row (G divides F; G = F or G = 1 in Qwen3.5).
//   x_NF, gate_NG -> y_NF (written =). Contiguous f32, 2-D.
// Backward: dx = dy * s; dgate[n, i] = s (1 - s) sum over group i of dy * x. Both written (=).
// Saved: none (s is one exp away from gate). Derivation: sigmoid_gate.md.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Throws naming the tensor and what it expected.
void check_sigmoid_gate(const Tensor& x_NF, const Tensor& gate_NG);

void sigmoid_gate_forward(const Tensor& x_NF, const Tensor& gate_NG, Tensor& y_NF);
void sigmoid_gate_backward(const Tensor& dy_NF, const Tensor& x_NF, const Tensor& gate_NG, Tensor& dx_NF,
                           Tensor& dgate_NG);

struct SigmoidGateTag;  // its function types are swiglu's
using SigmoidGateImpl = OpImpl<bool (*)(const Tensor& x_NF, const Tensor& gate_NG),
                               void (*)(const Tensor&, const Tensor&, Tensor&),
                               void (*)(const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&), SigmoidGateTag>;
OpTable<SigmoidGateImpl>& sigmoid_gate_table();
SigmoidGateImpl sigmoid_gate_impl_ref();
SigmoidGateImpl sigmoid_gate_impl_cpu();

namespace ref {
template <class T>
void sigmoid_gate_forward(int64_t n, int64_t f, int64_t g, const T* x, const T* gate, T* y);
template <class T>
void sigmoid_gate_backward(int64_t n, int64_t f, int64_t g, const T* dy, const T* x, const T* gate, T* dx, T* dgate);
}  // namespace ref

}  // namespace titan::ops
