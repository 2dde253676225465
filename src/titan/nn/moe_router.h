// The MoE router, the Router node kind (model.layers.<i>.moe.router): scores, top-k and combine
// weights over the router op (ops/moe_router), plus the load-balancing state that belongs to the
// routing: the per-expert selection bias (torchtitan's bias balancing) and the token counts.
// Legend: N tokens, D dim, E experts, K top_k.
#pragma once

#include <vector>

#include "titan/nn/module.h"
#include "titan/ops/moe_router/moe_router.h"

namespace titan::nn {

// none: plain top-k. aux_loss: HF's load-balancing loss (router_aux_loss_coef * aux added to
// the loss, as output_router_logits does). bias: torchtitan's per-expert selection bias, moved
// after each step towards equal loads (changes which experts are chosen, never their weights).
enum class LoadBalance { none, aux_loss, bias };
const char* load_balance_name(LoadBalance b);
// Throws naming the accepted values.
LoadBalance parse_load_balance(const std::string& name);

class RouterConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "Router";
  std::vector<std::string> type_chain() const override { return {kType}; }

  int64_t dim = 0;
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = true;
  LoadBalance load_balance = LoadBalance::none;
};

class RouterModule : public Module {
 public:
  static constexpr const char* kKind = "Router";
  // The routing of x_ND's tokens: probs_NE, expert_NK, weight_NK, expert_counts_E (the value the
  // MoE block keeps for backward).
  virtual void forward(const Tensor& x_ND, ops::MoeRouting& routing) const = 0;
  // dweight_NK (and dlogits_NE, undefined = none) back to dx_ND (written) and the router's weight
  // gradient (accumulated).
  virtual void backward(const Tensor& dweight_NK, const Tensor& dlogits_NE, const Tensor& x_ND,
                        const ops::MoeRouting& routing, Tensor& dx_ND) = 0;
  virtual void collect_buffers(ParameterList& out) = 0;  // non-trainable state a checkpoint holds
  // Pairs routed to each expert since the last reset (the MoE block counts each forward once).
  virtual std::vector<int64_t>& load() = 0;
  // torchtitan's update: bias += rate * (sign(mean load - load) - its mean); no-op without bias
  // balancing.
  virtual void update_expert_bias(double rate) = 0;
};

class Router : public RouterModule {
 public:
  // fqn: "layers.<i>.moe.router"; the selection bias keeps its checkpoint name
  // "layers.<i>.moe.expert_bias".
  Router(const RouterConfig& config, const std::string& fqn);

  void forward(const Tensor& x_ND, ops::MoeRouting& routing) const override;
  void backward(const Tensor& dweight_NK, const Tensor& dlogits_NE, const Tensor& x_ND, const ops::MoeRouting& routing,
                Tensor& dx_ND) override;
  void collect(ParameterList& out) override { out.push_back(&gate); }
  void collect_buffers(ParameterList& out) override;
  std::vector<int64_t>& load() override { return load_E_; }
  void update_expert_bias(double rate) override;
  std::string describe() const override { return "moe router (built-in)"; }

  Parameter gate;         // [E, D]
  Parameter expert_bias;  // [E], no gradient; defined only with LoadBalance::bias

 private:
  RouterConfig config_;
  ops::MoeRouterArgs args_;
  std::vector<int64_t> load_E_;
};

}  // namespace titan::nn
