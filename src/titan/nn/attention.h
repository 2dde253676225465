// Grouped-query causal self-attention with per-head q/k RMSNorm (Qwen3), applied before RoPE.
// Legend: N = B*T tokens, D model dim, H query heads, G kv heads, K head_dim.
//   q_NHK = rope(q_norm(x wq^T)), k_NGK = rope(k_norm(x wk^T)), v_NGK = x wv^T
//   o_NHK = attention(q, k, v) (causal), y_ND = o wo^T
#pragma once

#include "titan/nn/context.h"
#include "titan/nn/linear.h"
#include "titan/nn/rms_norm.h"
#include "titan/nn/rope.h"
#include "titan/ops/attention/attention.h"

namespace titan::nn {

struct AttentionConfig {
  int64_t dim = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool bias = false;     // q/k/v projection biases (HF attention_bias; Qwen2 always)
  bool qk_norm = true;   // Qwen3: RMSNorm over head_dim per head
  float norm_eps = 1e-6f;
  bool out_bias = false;  // o projection bias (HF attention_bias; Qwen2 has none)
};

class Attention {
 public:
  // What backward needs. wq/wk/wv keep the same input x; wo keeps o (as [N, H K]).
  struct Saved {
    Linear::Saved wq, wk, wv, wo;
    RmsNorm::Saved q_norm, k_norm;               // their inputs are the q / k projections
    Tensor q_BTHK, k_BTGK, v_BTGK, o_BTHK;       // attention's inputs (after norm and RoPE), output
    ops::AttentionSaved attention;               // per-row log-sum-exp
  };

  Attention(const AttentionConfig& config, const std::string& fqn);

  Tensor forward(const StepContext& ctx, const Tensor& x_ND, Saved& saved) const;
  Tensor backward(const StepContext& ctx, const Tensor& dy_ND, Saved& saved);  // returns dx_ND
  void collect(ParameterList& out);

  // Selective activation checkpointing: keep the GEMM and attention outputs, drop what cheap ops
  // make from them (the projections' input x; q and k after norm and RoPE, when there is a q/k
  // norm to rebuild them from). recompute() puts them back bit for bit from x.
  void drop_recomputable(Saved& saved) const;
  void recompute(const StepContext& ctx, const Tensor& x_ND, Saved& saved) const;

  Linear wq, wk, wv, wo;
  std::unique_ptr<RmsNorm> q_norm, k_norm;  // null without qk_norm
  std::unique_ptr<RopeModule> rope;          // built-in Rope unless an override replaced the node

 private:
  AttentionConfig config_;
};

}  // namespace titan::nn
