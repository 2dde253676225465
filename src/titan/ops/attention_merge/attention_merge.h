// Merge of partial attention results: R attentions of the same query rows over disjoint key
// ranges (ring / context-parallel attention, split-KV decoding) combined by their log-sum-exps
// into the attention over the union of the ranges (derivation: attention_merge.md):
//   lse = log sum_r exp(lse_r),   out = sum_r w_r out_r,   w_r = exp(lse_r - lse).
// Shapes: B batch, T query rows, H heads, Kv value head dim; R >= 1 parts, at most kMaxMergeParts.
//   outs[r] [B, T, H, Kv] (attention's out), lses[r] [B, H, T] (its lse) -> out [B, T, H, Kv],
//   lse [B, H, T]. A row with lse_r = -inf in every part (no visible key anywhere) merges to
//   out 0, lse -inf; a part with lse_r = -inf adds nothing.
// Backward, with dlse the merged lse's gradient (undefined: zero):
//   douts[r] = w_r dout,   dlses[r] = w_r (dout . (out_r - out) + dlse).
// dlses[r] is what attention_backward takes as dlse for part r, so the chain attention -> merge
// differentiates as attention over the whole range. Every gradient is an activation gradient,
// written (=). All tensors contiguous f32.
#pragma once

#include <span>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

constexpr int64_t kMaxMergeParts = 64;

// Throws naming the part and tensor that does not match.
void check_attention_merge(std::span<const Tensor> outs, std::span<const Tensor> lses);

// out and lse are written (=); allocated when undefined or of the wrong shape.
void attention_merge_forward(std::span<const Tensor> outs, std::span<const Tensor> lses, Tensor& out, Tensor& lse);
// douts[r] and dlses[r] are written (=); allocated when undefined or of the wrong shape.
void attention_merge_backward(const Tensor& dout, const Tensor& dlse, const Tensor& out, const Tensor& lse,
                              std::span<const Tensor> outs, std::span<const Tensor> lses, std::span<Tensor> douts,
                              std::span<Tensor> dlses);

using AttentionMergeImpl =
    OpImpl<bool (*)(std::span<const Tensor> outs, std::span<const Tensor> lses),
           void (*)(std::span<const Tensor>, std::span<const Tensor>, Tensor&, Tensor&),
           void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, std::span<const Tensor>,
                    std::span<const Tensor>, std::span<Tensor>, std::span<Tensor>)>;
OpTable<AttentionMergeImpl>& attention_merge_table();
AttentionMergeImpl attention_merge_impl_ref();
AttentionMergeImpl attention_merge_impl_cpu();

namespace ref {
// Scalar reference over raw arrays, rows = B*T*H output rows of width kv; the lse of output row
// n = (b, t, h) is at (b * H + h) * T + t. Accumulation in double. dlse may be null (zero).
struct MergeSizes {
  int64_t b, t, h, kv;
};
template <class T>
void attention_merge_forward(const MergeSizes& n, std::span<const T* const> outs, std::span<const T* const> lses,
                             T* out, T* lse);
template <class T>
void attention_merge_backward(const MergeSizes& n, const T* dout, const T* dlse, const T* out, const T* lse,
                              std::span<const T* const> outs, std::span<const T* const> lses,
                              std::span<T* const> douts, std::span<T* const> dlses);
}  // namespace ref

}  // namespace titan::ops
