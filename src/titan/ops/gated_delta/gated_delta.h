// The gated delta rule (Qwen3.5 / Qwen3-Next linear attention; FLA's chunk_gated_delta_rule with
// use_qk_l2norm_in_kernel, as Transformers' torch_chunk_gated_delta_rule computes it). Per batch
// row b and value head h, with key head hk = h / (Hv / Hk) (consecutive value heads share one
// key head, Transformers' repeat_interleave), a state S [Dk, Dv] starting at 0 (or `state`):
//   qh_t = q_t / sqrt(|q_t|^2 + eps) / sqrt(Dk),   kh_t = k_t / sqrt(|k_t|^2 + eps)
//   a_t = exp(g_t);   A = a_t S_{t-1};   u_t = A^T kh_t;   delta_t = beta_t (v_t - u_t)
//   S_t = A + kh_t delta_t^T;            o_t = S_t^T qh_t
// Shapes: B batch rows, T tokens, Hk key heads of Dk, Hv value heads of Dv, C = 2 Hk Dk + Hv Dv.
//   qkv_BTC: per token [q (Hk x Dk) | k (Hk x Dk) | v (Hv x Dv)], the causal conv's output row
//   g_BTH, beta_BTH: [B, T, Hv] log decay (<= 0 from Qwen3.5's gates) and write strength
//   o_BTV:  [B, T, Hv Dv] written (=)
//   state_BHKV (forward only, optional): [B, Hv, Dk, Dv]: read as S_0, overwritten with S_T
//     (generation). The backward assumes S_0 = 0 (a training sequence starts empty).
// Accumulation: dqkv, dg, dbeta are activation gradients, written (=).
// Saved: nothing; the backward recomputes the states (gated_delta.md).
// The CPU kernel runs the chunked (WY) form over `chunk` tokens at a time; the chunk is a kernel
// choice that changes results by rounding only (the reference is the sequential recurrence).
// Derivation of the chunked form and of the backward: gated_delta.md.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct GatedDeltaArgs {
  int64_t k_heads = 0, k_dim = 0, v_heads = 0, v_dim = 0;
  float eps = 1e-6f;   // of the q / k L2 norms
  int64_t chunk = 64;  // tokens per chunk (a kernel choice; the reference ignores it)
};

// Throws naming the tensor and what it expected.
void check_gated_delta(const GatedDeltaArgs& args, const Tensor& qkv_BTC, const Tensor& g_BTH,
                       const Tensor& beta_BTH);

// `state_BHKV` undefined: S_0 = 0 and the final state is not kept.
void gated_delta_forward(const GatedDeltaArgs& args, const Tensor& qkv_BTC, const Tensor& g_BTH,
                         const Tensor& beta_BTH, Tensor& o_BTV, Tensor& state_BHKV);
void gated_delta_backward(const GatedDeltaArgs& args, const Tensor& do_BTV, const Tensor& qkv_BTC,
                          const Tensor& g_BTH, const Tensor& beta_BTH, Tensor& dqkv_BTC, Tensor& dg_BTH,
                          Tensor& dbeta_BTH);

using GatedDeltaImpl =
    OpImpl<bool (*)(const GatedDeltaArgs& args, const Tensor& qkv_BTC),
           void (*)(const GatedDeltaArgs&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&),
           void (*)(const GatedDeltaArgs&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                    Tensor&, Tensor&)>;
OpTable<GatedDeltaImpl>& gated_delta_table();
GatedDeltaImpl gated_delta_impl_ref();
GatedDeltaImpl gated_delta_impl_cpu();

namespace ref {
// The sequential recurrence over raw row-major arrays, math in double; instantiated for float and
// double (the double instance is what the finite-difference check differentiates). `state` may
// be null (S_0 = 0, final state dropped).
template <class T>
void gated_delta_forward(const GatedDeltaArgs& args, int64_t batch, int64_t tokens, const T* qkv, const T* g,
                         const T* beta, T* o, T* state);
template <class T>
void gated_delta_backward(const GatedDeltaArgs& args, int64_t batch, int64_t tokens, const T* d_o, const T* qkv,
                          const T* g, const T* beta, T* dqkv, T* dg, T* dbeta);
}  // namespace ref

}  // namespace titan::ops
