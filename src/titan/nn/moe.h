// Sparse mixture-of-experts feed-forward (HF Qwen3MoeSparseMoeBlock) over the moe op: router
// (mlp.gate) -> fp32 softmax -> top-k -> optional renormalisation -> weighted sum of SwiGLU
// experts. Holds the load-balancing state; the decoder drives it across layers (the HF aux loss
// couples every MoE layer of a forward, see Decoder::forward_backward).
// Legend: N tokens, D dim, E experts, F expert hidden width (moe_intermediate_size).
#pragma once

#include <vector>

#include "titan/nn/parameter.h"
#include "titan/ops/moe/moe.h"

namespace titan::nn {

// none: plain top-k. aux_loss: HF's load-balancing loss (router_aux_loss_coef * aux added to
// the loss, as output_router_logits does). bias: torchtitan's per-expert selection bias, moved
// after each step towards equal loads (changes which experts are chosen, never their weights).
enum class LoadBalance { none, aux_loss, bias };
const char* load_balance_name(LoadBalance b);
// Throws naming the accepted values.
LoadBalance parse_load_balance(const std::string& name);

struct MoeConfig {
  int64_t dim = 0;
  int64_t hidden_dim = 0;  // per expert
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = true;
  LoadBalance load_balance = LoadBalance::none;
};

class Moe {
 public:
  Moe(const MoeConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& x_ND);
  Tensor backward(const Tensor& dy_ND);  // returns dx_ND
  void collect(ParameterList& out);         // router, w1, w2, w3
  void collect_buffers(ParameterList& out);  // expert_bias (bias balancing only)
  void release();

  const MoeConfig& config() const { return config_; }
  // Of the last forward: router probs f32 [N, E] and pairs routed to each expert i64 [E].
  const Tensor& router_probs() const { return saved_.probs_NE; }
  const Tensor& expert_counts() const { return saved_.expert_counts_E; }
  // The aux loss's gradient with respect to this layer's softmax output, per expert (the same
  // for every token: HF's aux is linear in the probs given the counts). Cleared by backward.
  void set_aux_dprobs(std::vector<double> dprobs_E) { aux_dprobs_E_ = std::move(dprobs_E); }

  // Pairs routed to each expert, summed over forwards since the last reset (load metrics).
  const std::vector<int64_t>& load() const { return load_E_; }
  // Data parallel: the trainer sums it over the ranks before the metrics and the bias update.
  std::vector<int64_t>& mutable_load() { return load_E_; }
  void reset_load() { std::fill(load_E_.begin(), load_E_.end(), 0); }
  // torchtitan's update: bias += rate * (sign(mean load - load) - its mean), from load().
  void update_expert_bias(double rate);

  Parameter router;       // [E, D]
  Parameter w1, w2, w3;   // gate [E, F, D], down [E, D, F], up [E, F, D]
  Parameter expert_bias;  // [E], no gradient; defined only with LoadBalance::bias

 private:
  MoeConfig config_;
  ops::MoeArgs args_;
  ops::MoeSaved saved_;
  Tensor x_ND_;
  std::vector<double> aux_dprobs_E_;
  std::vector<int64_t> load_E_;
};

}  // namespace titan::nn
