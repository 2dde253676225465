// Sparse mixture-of-experts feed-forward (HF Qwen3MoeSparseMoeBlock), the Moe node kind
// (model.layers.<i>.moe, sparse layers): its children router (mlp.gate -> fp32 softmax -> top-k
// -> optional renormalisation; a Router node) and experts (grouped SwiGLU; an Experts node), with
// the dispatch (tokens -> expert-sorted rows) and combine (weighted sum back) ops between them:
//   router -> dispatch -> experts -> combine
// With a shared expert (Qwen3.5 MoE, HF Qwen3_5MoeSparseMoeBlock; shared_expert_dim > 0), two more
// children: shared_expert (a dense SwiGLU FeedForward every token takes) and shared_expert_gate (a
// Linear D -> 1), and y = routed + sigmoid(shared_expert_gate(x)) * shared_expert(x).
// (expert parallelism puts an all-to-all after dispatch and before combine: nn/expert_parallel.h). The decoder drives
// the blocks across layers (the HF aux loss couples every MoE layer of a forward, see
// Decoder::forward_backward).
// Legend: N tokens, D dim, E experts, F expert hidden width (moe_intermediate_size).
#pragma once

#include <vector>

#include <any>

#include "titan/nn/context.h"
#include "titan/nn/expert_parallel.h"
#include "titan/nn/feed_forward.h"
#include "titan/nn/moe_experts.h"
#include "titan/nn/moe_router.h"
#include "titan/ops/moe_dispatch/moe_dispatch.h"

namespace titan::nn {

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
  int64_t shared_expert_dim = 0;  // the shared expert's FFN width; 0: none
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
  // Expert parallelism (nn/expert_parallel.h): keep this rank's experts only and exchange the
  // dispatch rows through `ep` from now on. The default refuses, naming the module.
  virtual void set_expert_parallel(ExpertParallelOps* ep);
  // The parameters split over expert-parallel ranks (the stacked expert weights); default none.
  virtual void collect_experts(ParameterList& out);
};

class Moe : public MoeModule {
 public:
  struct Saved {
    Tensor x_ND;               // the input (dropped under selective checkpointing: a norm's output)
    ops::MoeRouting routing;   // the router's output
    ops::MoeLayout layout;     // the dispatch layout
    std::any experts;          // the experts module's own saved state
    // Expert parallelism only: the exchange plan and the rows this rank's experts received (kept
    // for backward instead of exchanging the dispatch rows again).
    ExpertExchange exchange;
    Tensor x_RD;
    // The shared expert: its FFN's saved state and output, the gate's input and logits.
    std::any shared;
    LinearModule::Saved gate;
    Tensor shared_ND, gate_N1;
  };

  // Builds its children (router, experts) from the tree through `build`.
  Moe(const MoeConfig& config, const ModuleBuild& build);

  Tensor forward(const Tensor& x_ND, std::any& saved, RouterTotals* totals) override;
  Tensor backward(const StepContext& ctx, const Tensor& dy_ND, std::any& saved) override;
  void collect(ParameterList& out) override;          // router, w1, w2, w3
  void collect_buffers(ParameterList& out) override;  // expert_bias (bias balancing only)
  void check(int64_t batch, int64_t seq) const override;
  // The input is the only thing cheap to rebuild (router and experts are GEMMs).
  void drop_recomputable(std::any& saved) const override;
  void recompute(const Tensor& x_ND, std::any& saved) const override;
  std::vector<int64_t>& load() override { return router->load(); }
  void update_expert_bias(double rate) override { router->update_expert_bias(rate); }
  void set_expert_parallel(ExpertParallelOps* ep) override;
  void collect_experts(ParameterList& out) override { experts->collect(out); }
  std::string describe() const override { return "moe (built-in)"; }

  const MoeConfig& config() const { return config_; }

  std::unique_ptr<RouterModule> router;
  std::unique_ptr<ExpertsModule> experts;
  std::unique_ptr<FeedForwardModule> shared_expert;  // null without a shared expert
  std::unique_ptr<LinearModule> shared_expert_gate;

 private:
  // The experts' part of forward / backward: on this rank, or through the expert-parallel exchange.
  Tensor experts_forward(const Tensor& x_PD, Saved& s) const;
  void experts_backward(Tensor& g_PD, Saved& s, Tensor& dweight_NK);
  void experts_backward_ep(Tensor& g_PD, Saved& s, Tensor& dweight_NK);

  MoeConfig config_;
  ExpertParallelOps* ep_ = nullptr;  // set under expert parallelism
};

}  // namespace titan::nn
