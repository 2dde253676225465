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
  Attention(const AttentionConfig& config, const std::string& fqn);

  Tensor forward(const StepContext& ctx, const Tensor& x_ND);
  Tensor backward(const StepContext& ctx, const Tensor& dy_ND);  // returns dx_ND
  void collect(ParameterList& out);
  void release();

  Linear wq, wk, wv, wo;
  std::unique_ptr<RmsNorm> q_norm, k_norm;  // null without qk_norm
  std::unique_ptr<RopeModule> rope;          // built-in Rope unless an override replaced the node

 private:
  AttentionConfig config_;
  // Saved for backward.
  Tensor q_BTHK_, k_BTGK_, v_BTGK_, o_BTHK_;
  ops::AttentionSaved saved_;
};

}  // namespace titan::nn
