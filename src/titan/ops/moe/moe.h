// Sparse mixture of experts (HF Qwen3MoeSparseMoeBlock): router, top-k, experts, combine.
//   logits_NE = x_ND w_gate_ED^T;  probs_NE = softmax(logits_NE) over E (fp32)
//   top-k experts per token by prob (by prob + selection_bias when a bias is given: torchtitan's
//   bias-based load balancing, which moves selection only), ties to the lower expert index;
//   weight_NK = the top-k probs, divided by their sum when norm_topk_prob
//   out_ND[n] = sum_k weight[n, k] * w2[e] (silu(w1[e] x[n]) * (w3[e] x[n])),  e = expert[n, k]
// Shape legend: N tokens, D model width, E experts, F expert (moe) intermediate width, K top_k,
//   P = N*K (token, k) pairs. w1 = gate_proj [E, F, D], w3 = up_proj [E, F, D],
//   w2 = down_proj [E, D, F], w_gate = router [E, D]. All f32, contiguous.
// Dispatch layout (part of the contract, written by every implementation): the P pairs sorted
//   stably by expert, so expert e owns rows [offsets[e], offsets[e+1]) and within it the pairs
//   keep (token, k) ascending order. row_of_pair_NK maps a pair to its row, pair_of_row_P back.
// Backward: the top-k selection is piecewise constant (no gradient through it); gradients flow
//   through the selected weights, the renormalisation and the softmax into the router logits,
//   plus an optional extra drouter_logits_NE (e.g. from the load-balancing aux loss).
// Accumulation: dx is written (=); dw_gate, dw1, dw3, dw2 are accumulated (+=).
// Derivation of the backward: moe.md.
#pragma once

#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct MoeArgs {
  int64_t top_k = 2;
  bool norm_topk_prob = true;
  Tensor selection_bias_E;  // f32 [E] added to the probs for choosing experts only; undefined = none
};

// What backward needs, and the routing statistics callers read (counts for load metrics).
struct MoeSaved {
  Tensor probs_NE;          // f32 softmax of the router logits
  Tensor expert_NK;         // i32 chosen experts, by descending prob (ties: lower index first)
  Tensor weight_NK;         // f32 combine weights (renormalised when norm_topk_prob)
  Tensor expert_counts_E;   // i64 pairs routed to each expert (an output of the op)
  Tensor offsets_E1;        // i64 [E + 1] first dispatch row of each expert
  Tensor row_of_pair_NK;    // i32 dispatch row of pair (n, k)
  Tensor pair_of_row_P;     // i32 pair index n*K + k of each dispatch row
  Tensor gate_PF, up_PF;    // f32 w1[e] x and w3[e] x per dispatch row (pre-activation)
};

// Throws naming the tensor and the expected shape, or the bad argument.
void check_moe(const MoeArgs& args, const Tensor& x_ND, const Tensor& w_gate_ED,
               const Tensor& w1_EFD, const Tensor& w3_EFD, const Tensor& w2_EDF);

// out_ND and router_logits_NE are written; saved is (re)allocated.
void moe_forward(const MoeArgs& args, const Tensor& x_ND, const Tensor& w_gate_ED,
                 const Tensor& w1_EFD, const Tensor& w3_EFD, const Tensor& w2_EDF, Tensor& out_ND,
                 Tensor& router_logits_NE, MoeSaved& saved);
// drouter_logits_NE may be undefined (Tensor{}): no extra gradient on the logits.
void moe_backward(const MoeArgs& args, const Tensor& dout_ND, const Tensor& drouter_logits_NE,
                  const Tensor& x_ND, const Tensor& w_gate_ED, const Tensor& w1_EFD,
                  const Tensor& w3_EFD, const Tensor& w2_EDF, const MoeSaved& saved, Tensor& dx_ND,
                  Tensor& dw_gate_ED, Tensor& dw1_EFD, Tensor& dw3_EFD, Tensor& dw2_EDF);

using MoeImpl = OpImpl<
    bool (*)(const MoeArgs&, const Tensor& x_ND, const Tensor& w_gate_ED),
    void (*)(const MoeArgs&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, Tensor&, Tensor&, MoeSaved&),
    void (*)(const MoeArgs&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
             const Tensor&, const Tensor&, const Tensor&, const MoeSaved&, Tensor&, Tensor&,
             Tensor&, Tensor&, Tensor&)>;
OpTable<MoeImpl>& moe_table();
MoeImpl moe_impl_ref();
MoeImpl moe_impl_cpu();

namespace ref {
// Scalar reference over raw row-major arrays; instantiated for float and double (the double
// instance is what the finite-difference check differentiates). Plain loops over tokens and
// their chosen experts; backward recomputes the expert activations. dlogits may be null.
template <class T>
void moe_forward(int64_t n, int64_t d, int64_t e, int64_t f, int64_t top_k, bool norm_topk_prob,
                 const T* x, const T* w_gate, const T* w1, const T* w3, const T* w2, T* out,
                 T* logits, T* probs, int32_t* expert, T* weight,
                 const float* selection_bias = nullptr);
template <class T>
void moe_backward(int64_t n, int64_t d, int64_t e, int64_t f, int64_t top_k, bool norm_topk_prob,
                  const T* dout, const T* dlogits, const T* x, const T* w_gate, const T* w1,
                  const T* w3, const T* w2, const T* probs, const int32_t* expert,
                  const T* weight, T* dx, T* dw_gate, T* dw1, T* dw3, T* dw2);
}  // namespace ref

}  // namespace titan::ops
