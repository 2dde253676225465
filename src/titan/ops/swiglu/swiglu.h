// SwiGLU activation of the Qwen3 MLP (HF: act_fn(gate_proj(x)) * up_proj(x), act_fn = silu):
//   h = silu(gate) * up,  silu(g) = g * sigmoid(g).
// Shapes: N rows x F features, any rank (treated as one flat array of N*F elements).
//   gate_NF, up_NF -> h_NF; contiguous f32, all the same shape.
// Saved: none (backward recomputes sigmoid(gate) from gate, which the MLP keeps anyway).
// Accumulation: activation grads only, written (=): dgate, dup.
// Derivation of the backward: swiglu.md.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Throws naming the tensor and the expected shape.
void check_swiglu(const Tensor& gate_NF, const Tensor& up_NF);

void swiglu_forward(const Tensor& gate_NF, const Tensor& up_NF, Tensor& h_NF);
void swiglu_backward(const Tensor& dh_NF, const Tensor& gate_NF, const Tensor& up_NF,
                     Tensor& dgate_NF, Tensor& dup_NF);

using SwigluImpl =
    OpImpl<bool (*)(const Tensor& gate_NF, const Tensor& up_NF),
           void (*)(const Tensor&, const Tensor&, Tensor&),
           void (*)(const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&)>;
OpTable<SwigluImpl>& swiglu_table();
SwigluImpl swiglu_impl_ref();
SwigluImpl swiglu_impl_cpu();

namespace ref {
// Scalar reference over n flat elements; instantiated for float and double (the double
// instance is what the finite-difference check differentiates).
template <class T>
void swiglu_forward(int64_t n, const T* gate, const T* up, T* h);
template <class T>
void swiglu_backward(int64_t n, const T* dh, const T* gate, const T* up, T* dgate, T* dup);
}  // namespace ref

}  // namespace titan::ops
