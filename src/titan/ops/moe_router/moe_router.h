// MoE router (HF Qwen3MoeSparseMoeBlock's gate and top-k), the first of the MoE block's four ops
// (router -> dispatch -> experts -> combine; the block is ops/moe/moe.h):
//   logits_NE = x_ND w_gate_ED^T;  probs_NE = softmax(logits_NE) over E (fp32 values)
//   expert_NK: the top-k experts per token by logit (= by prob), or by prob + selection_bias when a
//     bias is given (torchtitan's bias-based load balancing, which moves selection only); ties to
//     the lower expert index; k ascending = descending key
//   weight_NK = the chosen probs, divided by their sum when norm_topk_prob
//   expert_counts_E = (token, k) pairs routed to each expert (i64; load metrics, aux loss)
// Shape legend: N tokens, D model width, E experts, K top_k. All f32 and contiguous unless noted.
// Backward: the selection is piecewise constant (no gradient through it). dweight_NK flows through
//   the renormalisation and the softmax into the logits, plus dlogits_NE, the gradient of the
//   logits from their other consumers (e.g. the load-balancing aux loss; undefined = none).
// Accumulation: dx_ND is written (=); dw_gate_ED is accumulated (+=).
// Derivation of the backward: moe_router.md.
#pragma once

#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct MoeRouterArgs {
  int64_t top_k = 2;
  bool norm_topk_prob = true;
  Tensor selection_bias_E;  // f32 [E] added to the probs for choosing experts only; undefined = none
};

// The router's outputs besides the logits, (re)allocated by forward; backward reads all but counts.
struct MoeRouting {
  Tensor probs_NE;         // f32 softmax of the logits
  Tensor expert_NK;        // i32 chosen experts, by descending key (ties: lower index first)
  Tensor weight_NK;        // f32 combine weights (renormalised when norm_topk_prob)
  Tensor expert_counts_E;  // i64 pairs routed to each expert
};

// Throws naming the tensor and the expected shape, or the bad argument.
void check_moe_router(const MoeRouterArgs& args, const Tensor& x_ND, const Tensor& w_gate_ED);

// logits_NE is written; routing is (re)allocated.
void moe_router_forward(const MoeRouterArgs& args, const Tensor& x_ND, const Tensor& w_gate_ED,
                        Tensor& logits_NE, MoeRouting& routing);
void moe_router_backward(const MoeRouterArgs& args, const Tensor& dweight_NK,
                         const Tensor& dlogits_NE, const Tensor& x_ND, const Tensor& w_gate_ED,
                         const MoeRouting& routing, Tensor& dx_ND, Tensor& dw_gate_ED);

using MoeRouterImpl = OpImpl<
    bool (*)(const MoeRouterArgs&, const Tensor& x_ND, const Tensor& w_gate_ED),
    void (*)(const MoeRouterArgs&, const Tensor&, const Tensor&, Tensor&, MoeRouting&),
    void (*)(const MoeRouterArgs&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
             const MoeRouting&, Tensor&, Tensor&)>;
OpTable<MoeRouterImpl>& moe_router_table();
MoeRouterImpl moe_router_impl_ref();
MoeRouterImpl moe_router_impl_cpu();
MoeRouterImpl moe_router_impl_meta();  // the CPU kernel's allocations, no values

namespace ref {
// Scalar reference over raw row-major arrays, math in double; instantiated for float and double
// (the double instance is what the finite-difference check differentiates). selection_bias and
// dlogits may be null. Backward writes dx and adds to dw_gate.
template <class T>
void moe_router_forward(int64_t n, int64_t d, int64_t e, int64_t top_k, bool norm_topk_prob,
                        const T* x, const T* w_gate, const float* selection_bias, T* logits,
                        T* probs, int32_t* expert, T* weight);
template <class T>
void moe_router_backward(int64_t n, int64_t d, int64_t e, int64_t top_k, bool norm_topk_prob,
                         const T* dweight, const T* dlogits, const T* x, const T* w_gate,
                         const T* probs, const int32_t* expert, const T* weight, T* dx,
                         T* dw_gate);
}  // namespace ref

}  // namespace titan::ops
