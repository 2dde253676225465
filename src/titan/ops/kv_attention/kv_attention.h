// Attention of new queries over a key/value cache: the decode-time (inference) form of causal
// grouped-query attention. Forward only; no backward (nothing trains through a cache).
// Shapes: B batch, S new tokens (the prompt at prefill, 1 per decode step), C cache capacity,
//   H query heads, G kv heads (H % G == 0), K head dim.
//   q_BSHK (after q-norm and RoPE), k_BCGK / v_BCGK the caches (keys after k-norm and RoPE) with
//   slots [0, end) filled, the S new tokens' keys/values already written at [end - S, end);
//   begin_B i64 [B]: the first valid slot of each row (left padding of a batch of prompts of
//   different lengths: slots below begin_B[b] are masked out) -> out_BSHK.
//   Query s of row b sits at slot p = end - S + s and attends the slots j in [begin_B[b], p]:
//     out = sum_j softmax_j(scale q . k_j) v_j.  A query with no valid slot (p < begin_B[b], a
//   padding position) gets zeros. Query head h reads kv head h / (H / G).
// All f32, contiguous; products and softmax in f32 (the reference accumulates in double).
// This is the seam for a device kernel (CUDA later): the implementation table dispatches by the
// device of q, like every op (ops/registry.h).
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct KvAttentionArgs {
  float scale = 0.0f;  // 0 means 1 / sqrt(K)
};

// Throws naming the tensor and the expected shape.
void check_kv_attention(const Tensor& q_BSHK, const Tensor& k_BCGK, const Tensor& v_BCGK, const Tensor& begin_B,
                        int64_t end);

// out_BSHK (contiguous f32, q's shape) is written.
void kv_attention_forward(const KvAttentionArgs& args, const Tensor& q_BSHK, const Tensor& k_BCGK,
                          const Tensor& v_BCGK, const Tensor& begin_B, int64_t end, Tensor& out_BSHK);

using KvAttentionImpl =
    OpImpl<bool (*)(const Tensor& q_BSHK, const Tensor& k_BCGK, const Tensor& v_BCGK),
           void (*)(const KvAttentionArgs&, const Tensor& q_BSHK, const Tensor& k_BCGK, const Tensor& v_BCGK,
                    const Tensor& begin_B, int64_t end, Tensor& out_BSHK),
           void (*)()>;  // no backward
OpTable<KvAttentionImpl>& kv_attention_table();
KvAttentionImpl kv_attention_impl_ref();
KvAttentionImpl kv_attention_impl_cpu();

}  // namespace titan::ops
