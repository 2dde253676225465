// MoE experts: the grouped SwiGLU MLPs over the dispatch rows, the third of the MoE block's four
// ops (router -> dispatch -> experts -> combine):
//   gate_PF = w1[e] x,  up_PF = w3[e] x,  h = silu(gate) * up,  y_PD = w2[e] h
//   for each dispatch row r of expert e, r in [offsets_E1[e], offsets_E1[e+1]) (moe_dispatch.h).
// Shape legend: P dispatch rows, D model width, E experts, F expert (moe) intermediate width,
//   N tokens, K top_k (P = N*K). w1 = gate_proj [E, F, D], w3 = up_proj [E, F, D],
//   w2 = down_proj [E, D, F]. Contiguous; offsets i64, pair_of_row i32.
// Dtypes: x, w1, w3 and w2 all f32, or all bf16 (the bf16 compute path; y, dy, dx, the weight
//   gradients, the routing weights and saved are f32 either way). With bf16 operands every product
//   multiplies bf16 values exactly and accumulates in f32, and these are rounded to bf16 (round to
//   nearest even) before the products that read them, as autocast does at a bf16 linear's inputs:
//   h (forward's down product; backward uses the rounded h_b throughout), dy (dh' = dy w2 and
//   dW2), s h_b (dW2, weighted), and dgate, dup (dW1, dW3, dx). dweight = dh' . h_b.
// Backward, plain: dy_PD is the gradient of y_PD.
// Backward with the routing weights (weight_NK and pair_of_row_P given): the backward of the
//   weighted rows s[r] * y_PD[r], s[r] = weight_NK[pair_of_row_P[r]]; dy_PD is the gradient of
//   those weighted rows (what combine's unweighted backward returns), and
//   dweight_NK[pair_of_row_P[r]] = dy_PD[r] . y_PD[r] is written. The block applies the weights
//   in combine's forward and here in backward, which is the fused kernel's arithmetic to the bit
//   (moe_experts.md); forward never weights.
// Saved: gate_PF and up_PF (h is recomputed in backward).
// Accumulation: dx_PD and dweight_NK are written (=); dw1, dw3, dw2 are accumulated (+=).
// In place: dx_PD may be dy_PD itself (every implementation reads dy before it writes dx); the
//   block does that, as the fused kernel did, to keep one fewer P x D buffer.
// Derivation of the backward: moe_experts.md.
#pragma once

#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct MoeExpertsSaved {
  Tensor gate_PF, up_PF;  // f32 w1[e] x and w3[e] x per dispatch row (pre-activation)
};

// Throws naming the tensor and the expected shape.
void check_moe_experts(const Tensor& x_PD, const Tensor& offsets_E1, const Tensor& w1_EFD,
                       const Tensor& w3_EFD, const Tensor& w2_EDF);

// y_PD is written; saved is (re)allocated. offsets must be a valid layout (moe_dispatch.h).
void moe_experts_forward(const Tensor& x_PD, const Tensor& offsets_E1, const Tensor& w1_EFD,
                         const Tensor& w3_EFD, const Tensor& w2_EDF, Tensor& y_PD,
                         MoeExpertsSaved& saved);
// weight_NK, pair_of_row_P and dweight_NK: all defined (backward with the routing weights) or
// all undefined (plain backward).
void moe_experts_backward(const Tensor& dy_PD, const Tensor& weight_NK,
                          const Tensor& pair_of_row_P, const Tensor& x_PD,
                          const Tensor& offsets_E1, const Tensor& w1_EFD, const Tensor& w3_EFD,
                          const Tensor& w2_EDF, const MoeExpertsSaved& saved, Tensor& dx_PD,
                          Tensor& dw1_EFD, Tensor& dw3_EFD, Tensor& dw2_EDF, Tensor& dweight_NK);

using MoeExpertsImpl = OpImpl<
    bool (*)(const Tensor& x_PD, const Tensor& w1_EFD),
    void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
             MoeExpertsSaved&),
    void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, const Tensor&, const MoeExpertsSaved&, Tensor&, Tensor&,
             Tensor&, Tensor&, Tensor&)>;
OpTable<MoeExpertsImpl>& moe_experts_table();
MoeExpertsImpl moe_experts_impl_ref();
MoeExpertsImpl moe_experts_impl_cpu();
MoeExpertsImpl moe_experts_impl_meta();  // the CPU kernel's allocations, no values

namespace ref {
// Scalar reference over raw row-major arrays, math in double; instantiated for float and double
// (the double instance is what the finite-difference check differentiates). Backward recomputes
// the activations from x; weight (with pair_of_row and dweight) may be null: plain backward.
template <class T>
void moe_experts_forward(int64_t e, int64_t d, int64_t f, const int64_t* offsets, const T* x,
                         const T* w1, const T* w3, const T* w2, T* y, T* gate, T* up, bool round_bf16 = false);
// round_bf16: the bf16 contract's roundings (above) on bf16-valued inputs given widened.
template <class T>
void moe_experts_backward(int64_t e, int64_t d, int64_t f, const int64_t* offsets, const T* dy,
                          const T* weight, const int32_t* pair_of_row, const T* x, const T* w1,
                          const T* w3, const T* w2, T* dx, T* dw1, T* dw3, T* dw2, T* dweight,
                          bool round_bf16 = false);
}  // namespace ref

}  // namespace titan::ops
