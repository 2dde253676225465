// Sparse mixture of experts (HF Qwen3MoeSparseMoeBlock): the composition of four ops,
//   router   (moe_router.h):   logits, fp32 softmax probs, top-k (+ selection bias), weights
//   dispatch (moe_dispatch.h): pairs sorted by expert, token rows gathered into dispatch rows
//   experts  (moe_experts.h):  grouped SwiGLU MLPs over the dispatch rows
//   combine  (moe_combine.h):  each token's rows summed with its routing weights
// so that expert parallelism can put an all-to-all between dispatch and experts, and other
// routings can reuse the pieces. In one line:
//   out_ND[n] = sum_k weight[n, k] * w2[e] (silu(w1[e] x[n]) * (w3[e] x[n])),  e = expert[n, k]
// Shape legend: N tokens, D model width, E experts, F expert (moe) intermediate width, K top_k,
//   P = N*K (token, k) pairs. w1 = gate_proj [E, F, D], w3 = up_proj [E, F, D],
//   w2 = down_proj [E, D, F], w_gate = router [E, D]. All f32, contiguous.
// Backward: combine's unweighted backward, the experts' backward with the routing weights (which
//   yields dweight), the router's backward (dweight + drouter_logits -> dx, dw_gate), dispatch's
//   backward adding the experts' part to dx. The weights are applied in combine in forward and
//   in the experts in backward: that is the arithmetic of the fused kernel this replaced, to the
//   bit (moe.md). drouter_logits_NE is an optional extra gradient on the logits (aux loss).
// Accumulation: dx is written (=); dw_gate, dw1, dw3, dw2 are accumulated (+=).
#pragma once

#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/moe_combine/moe_combine.h"
#include "titan/ops/moe_dispatch/moe_dispatch.h"
#include "titan/ops/moe_experts/moe_experts.h"
#include "titan/ops/moe_router/moe_router.h"

namespace titan::ops {

// The block's arguments are the router's: top_k, norm_topk_prob, selection_bias_E.
using MoeArgs = MoeRouterArgs;

// What backward needs, and the routing statistics callers read (probs, counts): the router's
// outputs, the dispatch layout and the experts' pre-activations. The dispatch rows themselves
// (x_PD, P*D floats) are not kept: backward gathers them again.
struct MoeSaved : MoeRouting, MoeLayout, MoeExpertsSaved {};

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

// The whole block as one scalar reference (moe_ref.cpp), independent of the four ops: the oracle
// the composition is tested against. Same contract as moe_forward / moe_backward, checks aside.
void moe_forward_ref(const MoeArgs& args, const Tensor& x_ND, const Tensor& w_gate_ED,
                     const Tensor& w1_EFD, const Tensor& w3_EFD, const Tensor& w2_EDF,
                     Tensor& out_ND, Tensor& router_logits_NE, MoeSaved& saved);
void moe_backward_ref(const MoeArgs& args, const Tensor& dout_ND, const Tensor& drouter_logits_NE,
                      const Tensor& x_ND, const Tensor& w_gate_ED, const Tensor& w1_EFD,
                      const Tensor& w3_EFD, const Tensor& w2_EDF, const MoeSaved& saved,
                      Tensor& dx_ND, Tensor& dw_gate_ED, Tensor& dw1_EFD, Tensor& dw3_EFD,
                      Tensor& dw2_EDF);

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
