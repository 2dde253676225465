// Sparse mixture-of-experts feed-forward (HF Qwen3MoeSparseMoeBlock), the Moe node kind
// (model.layers.<i>.moe, sparse layers), over the moe op: router
// (mlp.gate) -> fp32 softmax -> top-k -> optional renormalisation -> weighted sum of SwiGLU
// experts. Holds the load-balancing state; the decoder drives it across layers (the HF aux loss
// couples every MoE layer of a forward, see Decoder::forward_backward).
// Legend: N tokens, D dim, E experts, F expert hidden width (moe_intermediate_size).
#pragma once

#include <vector>

#include <any>

#include "titan/nn/context.h"
#include "titan/nn/module.h"
#include "titan/ops/moe/moe.h"

namespace titan::nn {

// none: plain top-k. aux_loss: HF's load-balancing loss (router_aux_loss_coef * aux added to
// the loss, as output_router_logits does). bias: torchtitan's per-expert selection bias, moved
// after each step towards equal loads (changes which experts are chosen, never their weights).
enum class LoadBalance { none, aux_loss, bias };
const char* load_balance_name(LoadBalance b);
// Throws naming the accepted values.
LoadBalance parse_load_balance(const std::string& name);

class MoeConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "Moe";
  MoeConfig() = default;
  MoeConfig(int64_t dim_, int64_t hidden_dim_, int64_t num_experts_, int64_t top_k_, bool norm_topk_prob_,
            LoadBalance load_balance_)
      : dim(dim_), hidden_dim(hidden_dim_), num_experts(num_experts_), top_k(top_k_),
        norm_topk_prob(norm_topk_prob_), load_balance(load_balance_) {}
  std::vector<std::string> type_chain() const override { return {kType}; }

  int64_t dim = 0;
  int64_t hidden_dim = 0;  // per expert
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = true;
  LoadBalance load_balance = LoadBalance::none;
};

// HF's aux-loss inputs over every MoE layer of one forward, summed in layer order: pairs routed
// to each expert, router probs summed per expert, and the rows (tokens x layers) they cover.
struct RouterTotals {
  std::vector<double> counts_E, prob_sums_E;
  int64_t rows = 0;
};

class MoeModule : public Module {
 public:
  static constexpr const char* kKind = "Moe";
  // totals: the forward's routing statistics go there (aux-loss sums) and into load(); null for a
  // recomputation (activation checkpointing), which must not count a micro-batch twice.
  virtual Tensor forward(const Tensor& x_ND, std::any& saved, RouterTotals* totals) = 0;
  // Returns dx_ND; adds ctx.moe_aux_dprobs_E's gradient to the router's; consumes `saved`.
  virtual Tensor backward(const StepContext& ctx, const Tensor& dy_ND, std::any& saved) = 0;
  // Selective checkpointing, as FeedForwardModule's (default: keep everything).
  virtual void drop_recomputable(std::any& saved) const;
  virtual void recompute(const Tensor& x_ND, std::any& saved) const;
  virtual void collect_buffers(ParameterList& out) = 0;  // non-trainable state a checkpoint holds
  // Pairs routed to each expert, summed over forwards since the last reset (load metrics); the
  // trainer sums it over data-parallel ranks before the metrics and the bias update.
  virtual std::vector<int64_t>& load() = 0;
  // torchtitan's update: bias += rate * (sign(mean load - load) - its mean), from load(); no-op
  // without bias balancing.
  virtual void update_expert_bias(double rate) = 0;
};

class Moe : public MoeModule {
 public:
  struct Saved {
    Tensor x_ND;       // the input (dropped under selective checkpointing: a norm's output)
    ops::MoeSaved op;  // routing, dispatch and the experts' pre-activations
  };

  Moe(const MoeConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& x_ND, std::any& saved, RouterTotals* totals) override;
  Tensor backward(const StepContext& ctx, const Tensor& dy_ND, std::any& saved) override;
  void collect(ParameterList& out) override;         // router, w1, w2, w3
  void collect_buffers(ParameterList& out) override;  // expert_bias (bias balancing only)
  // The input is the only thing cheap to rebuild (router and experts are GEMMs).
  void drop_recomputable(std::any& saved) const override;
  void recompute(const Tensor& x_ND, std::any& saved) const override;
  std::vector<int64_t>& load() override { return load_E_; }
  void update_expert_bias(double rate) override;
  std::string describe() const override { return "moe (built-in)"; }

  const MoeConfig& config() const { return config_; }

  Parameter router;       // [E, D]
  Parameter w1, w2, w3;   // gate [E, F, D], down [E, D, F], up [E, F, D]
  Parameter expert_bias;  // [E], no gradient; defined only with LoadBalance::bias

 private:
  MoeConfig config_;
  ops::MoeArgs args_;
  std::vector<int64_t> load_E_;
};

}  // namespace titan::nn
