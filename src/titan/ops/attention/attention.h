// Causal grouped-query attention (GQA), memory-efficient: no [T, T] buffer per head.
//   out = softmax(q k^T * scale + causal mask) v, per (batch b, query head h).
// Shapes: B batch, T tokens, H query heads, G kv heads (H % G == 0), K head dim.
//   q_BTHK, k_BTGK, v_BTGK -> out_BTHK; saved lse_BHT (log-sum-exp of each query row's scaled
//   scores). Query head h reads kv head h / (H / G). All tensors contiguous f32.
// Accumulation: every gradient here is an activation gradient, so dq, dk and dv are written (=).
// Derivation of the forward (online softmax) and the backward, and the CPU tiling: attention.md.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct AttentionArgs {
  float scale = 0.0f;  // 0 means 1 / sqrt(K)
};

struct AttentionSaved {
  Tensor lse_BHT;  // f32
};

// Throws naming the tensor and the expected shape.
void check_attention(const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK);

// out_BTHK is written; saved.lse_BHT is allocated when undefined or of the wrong size.
void attention_forward(const AttentionArgs& args, const Tensor& q_BTHK, const Tensor& k_BTGK,
                       const Tensor& v_BTGK, Tensor& out_BTHK, AttentionSaved& saved);
// dq_BTHK, dk_BTGK and dv_BTGK are written (=).
void attention_backward(const AttentionArgs& args, const Tensor& dout_BTHK, const Tensor& q_BTHK,
                        const Tensor& k_BTGK, const Tensor& v_BTGK, const Tensor& out_BTHK,
                        const AttentionSaved& saved, Tensor& dq_BTHK, Tensor& dk_BTGK,
                        Tensor& dv_BTGK);

// The scale actually used: args.scale, or 1 / sqrt(K) when it is 0.
float attention_scale(const AttentionArgs& args, int64_t head_dim);

using AttentionImpl =
    OpImpl<bool (*)(const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK),
           void (*)(const AttentionArgs&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                    AttentionSaved&),
           void (*)(const AttentionArgs&, const Tensor&, const Tensor&, const Tensor&,
                    const Tensor&, const Tensor&, const AttentionSaved&, Tensor&, Tensor&, Tensor&)>;
OpTable<AttentionImpl>& attention_table();
AttentionImpl attention_impl_ref();
AttentionImpl attention_impl_cpu();

namespace ref {
// Scalar reference over raw row-major arrays (q [b, t, h, k], k/v [b, t, g, k], out [b, t, h, k],
// lse [b, h, t]); `scale` is the resolved scale. Instantiated for float and double (the double
// instance is what the finite-difference check differentiates). O(T) scratch per query row.
template <class T>
void attention_forward(int64_t b, int64_t t, int64_t h, int64_t g, int64_t k, double scale,
                       const T* q, const T* key, const T* v, T* out, T* lse);
template <class T>
void attention_backward(int64_t b, int64_t t, int64_t h, int64_t g, int64_t k, double scale,
                        const T* dout, const T* q, const T* key, const T* v, const T* out,
                        const T* lse, T* dq, T* dkey, T* dv);
}  // namespace ref

}  // namespace titan::ops
