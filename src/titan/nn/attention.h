// Grouped-query causal self-attention with per-head q/k RMSNorm (Qwen3), applied before RoPE: the
// Attention node kind (model.layers.<i>.attention). Its children are nodes too: the projections
// .wq / .wk / .wv / .wo (Linear), .rope, and .q_norm / .k_norm with qk_norm.
// Legend: N = B*T tokens, D model dim, H query heads, G kv heads, K head_dim.
//   q_NHK = rope(q_norm(x wq^T)), k_NGK = rope(k_norm(x wk^T)), v_NGK = x wv^T
//   o_NHK = attention(q, k, v) (causal), y_ND = o wo^T
// The attention runs locally over the micro-batch's tokens, or through ctx.sequence when the
// sequence is more than them (nn/sequence_attention.h), this layer named by its FQN.
// With output_gate (Qwen3.5's full attention): wq yields [query | gate] per head (2 K wide), and
// y_ND = (o * sigmoid(gate)) wo^T. RoPE may rotate only part of each head (the tables' head_dim,
// partial rotary): ops/rope.
// forward_cached (generation): the same q, k, v for the new tokens only; k and v appended to the
// layer's cache (nn/kv_cache.h), o = kv_attention(q, cached k, cached v) (ops/kv_attention).
#pragma once

#include <any>

#include "titan/nn/context.h"
#include "titan/nn/kv_cache.h"
#include "titan/nn/linear.h"
#include "titan/nn/rms_norm.h"
#include "titan/nn/rope.h"
#include "titan/nn/sequence_attention.h"
#include "titan/ops/attention/attention.h"

namespace titan::nn {

class AttentionConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "Attention";
  std::vector<std::string> type_chain() const override { return {kType}; }

  int64_t dim = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool bias = false;     // q/k/v projection biases (HF attention_bias; Qwen2 always)
  bool qk_norm = true;   // Qwen3: RMSNorm over head_dim per head
  float norm_eps = 1e-6f;
  bool out_bias = false;  // o projection bias (HF attention_bias; Qwen2 has none)
  bool output_gate = false;  // wq also yields a sigmoid gate on o per head (Qwen3.5)
};

class AttentionModule : public Module {
 public:
  static constexpr const char* kKind = "Attention";
  virtual Tensor forward(const StepContext& ctx, const Tensor& x_ND, std::any& saved) const = 0;
  // Returns dx_ND; parameter grads +=; consumes `saved`.
  virtual Tensor backward(const StepContext& ctx, const Tensor& dy_ND, std::any& saved) = 0;
  // Selective activation checkpointing: drop from `saved` what is cheap to rebuild from the input
  // x_ND, and rebuild it bit for bit. The default keeps everything.
  virtual void drop_recomputable(std::any& saved) const;
  virtual void recompute(const StepContext& ctx, const Tensor& x_ND, std::any& saved) const;
  // Inference with a KV cache (generation): x_ND holds ctx.seq new tokens per row, whose
  // positions ctx carries; their keys and values are written into cache.k_BCGK[layer] /
  // v_BCGK[layer] at slots [cache.length, cache.length + ctx.seq) and the queries attend over
  // the filled slots. Saves nothing. The default throws: a module without a cached path cannot
  // generate.
  virtual Tensor forward_cached(const StepContext& ctx, const Tensor& x_ND, KvCache& cache, int64_t layer) const;
};

class Attention : public AttentionModule {
 public:
  // What backward needs. wq/wk/wv keep the same input x; wo keeps o (as [N, H K]).
  struct Saved {
    LinearModule::Saved wq, wk, wv, wo;
    Tensor q_pre_BTHK, k_pre_BTGK;           // the q / k projections (the q/k norms' inputs)
    std::any q_norm, k_norm;
    Tensor q_BTHK, k_BTGK, v_BTGK, o_BTHK;   // attention's inputs (after norm and RoPE), output
    ops::AttentionSaved attention;           // per-row log-sum-exp
    std::any sequence;                       // what ctx.sequence keeps instead, when set
    Tensor gate_NX;                          // with output_gate: the gate, [N, H K]
  };

  // Builds its children (the projections, rope, q_norm, k_norm) from the tree through `build`.
  Attention(const AttentionConfig& config, const ModuleBuild& build);

  Tensor forward(const StepContext& ctx, const Tensor& x_ND, std::any& saved) const override;
  Tensor backward(const StepContext& ctx, const Tensor& dy_ND, std::any& saved) override;
  void collect(ParameterList& out) override;
  // Its children's constraints: the q/k norms, and RoPE for the query and the kv heads.
  void check(int64_t batch, int64_t seq) const override;
  // Keeps the GEMM and attention outputs; drops the projections' input x and, with a q/k norm to
  // rebuild them from, q and k after norm and RoPE.
  void drop_recomputable(std::any& saved) const override;
  void recompute(const StepContext& ctx, const Tensor& x_ND, std::any& saved) const override;
  Tensor forward_cached(const StepContext& ctx, const Tensor& x_ND, KvCache& cache, int64_t layer) const override;
  std::string describe() const override { return "attention (built-in)"; }

  std::unique_ptr<LinearModule> wq, wk, wv, wo;
  std::unique_ptr<RmsNormModule> q_norm, k_norm;  // null without qk_norm
  std::unique_ptr<RopeModule> rope;

 private:
  AttentionConfig config_;
  std::string fqn_;  // "layers.3.attention": the layer's name for ctx.sequence
};

}  // namespace titan::nn
