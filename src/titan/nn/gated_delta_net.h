// Gated DeltaNet linear attention (Qwen3.5 / Qwen3-Next `linear_attn`, Transformers'
// Qwen3_5GatedDeltaNet): the GatedDeltaNet node, a module of the Attention kind (it stands in a
// block's attention slot). Its children are nodes too: the projections .in_proj_qkv / .in_proj_z
// / .in_proj_b / .in_proj_a / .out_proj (Linear) and .norm (RmsNorm over one value head); its own
// parameters are conv1d.weight [C, K] (HF's [C, 1, K]), A_log [Hv] and dt_bias [Hv].
// Legend: N = B*T tokens, D dim, Hk key heads of Dk, Hv value heads of Dv, C = 2 Hk Dk + Hv Dv.
//   qkv_NC = x in_proj_qkv^T; z = x in_proj_z^T [N, Hv Dv]; b, a = x in_proj_b^T, x in_proj_a^T [N, Hv]
//   mixed = silu(causal_conv1d(qkv))                  (ops/causal_conv1d)
//   g, beta = delta_gates(a, b, A_log, dt_bias)      (ops/delta_gates)
//   o = gated_delta(mixed, g, beta) [N, Hv Dv]         (ops/gated_delta: L2-normalised q, k)
//   y = out_proj(silu(z) * norm(o))                   (the gated RMSNorm per value head: rms_norm, swiglu)
#pragma once

#include <any>

#include "titan/nn/attention.h"
#include "titan/ops/causal_conv1d/causal_conv1d.h"
#include "titan/ops/gated_delta/gated_delta.h"

namespace titan::nn {

class GatedDeltaNetConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "GatedDeltaNet";
  std::vector<std::string> type_chain() const override { return {kType}; }

  int64_t dim = 0;
  int64_t k_heads = 0, k_dim = 0, v_heads = 0, v_dim = 0;
  int64_t conv_kernel = 4;
  float norm_eps = 1e-6f;

  int64_t conv_channels() const { return 2 * k_heads * k_dim + v_heads * v_dim; }
  int64_t value_width() const { return v_heads * v_dim; }
};

class GatedDeltaNet : public AttentionModule {
 public:
  struct Saved {
    LinearModule::Saved qkv_proj, z_proj, b_proj, a_proj, out_proj;
    Tensor qkv_BTC, z_NV, b_NH, a_NH;  // the projections' outputs
    Tensor mixed_BTC, g_BTH, beta_BTH;  // the delta rule's inputs
    std::any norm;                      // its input: the delta rule's output
    Tensor normed_MV;                   // the norm's output, M = N Hv rows of Dv
  };

  // Builds its children (the projections, the norm) from the tree through `build`.
  GatedDeltaNet(const GatedDeltaNetConfig& config, const ModuleBuild& build);

  Tensor forward(const StepContext& ctx, const Tensor& x_ND, std::any& saved) const override;
  Tensor backward(const StepContext& ctx, const Tensor& dy_ND, std::any& saved) override;
  // Generation: the new tokens of each row continue its recurrent state in `cache` (the conv's last
  // inputs and the delta rule's state of layer `layer`, both updated); left-padding rows are
  // zeroed first (ctx.padding_N), which leaves a zero state zero, as Transformers masks them.
  Tensor forward_cached(const StepContext& ctx, const Tensor& x_ND, KvCache& cache, int64_t layer) const override;
  void collect(ParameterList& out) override;
  void check(int64_t batch, int64_t seq) const override;
  std::string describe() const override { return "gated_delta_net (built-in)"; }

  std::unique_ptr<LinearModule> in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj;
  std::unique_ptr<RmsNormModule> norm;
  Parameter conv1d;   // [C, K]
  Parameter a_log;    // [Hv]
  Parameter dt_bias;  // [Hv]

  const GatedDeltaNetConfig& config() const { return config_; }

 private:
  ops::GatedDeltaArgs delta_args() const;
  GatedDeltaNetConfig config_;
};

// Puts the nodes of a GatedDeltaNet at `path` ("model.layers.0.attention") into `tree`: itself and
// its children, each projection without bias.
void add_gated_delta_net_nodes(ConfigTree& tree, const std::string& path, const GatedDeltaNetConfig& config);

}  // namespace titan::nn
