// The decoder's part in each training step beyond its forward and backward, as the trainer sees it
// through Parallelized's generic seams: the MoE's post-step hook (bias balancing, or a load reset)
// and the step metrics an MoE reports (expert load, aux loss, the ep ranks' loads). A dense model
// registers no hook and reports nothing.
#include <cstdio>
#include <limits>

#include "titan/core/error.h"
#include "titan/models/decoder/parallelize.h"

namespace titan::models {
namespace {

std::string formatted(const char* pattern, auto... values) {
  char text[96];
  const int used = std::snprintf(text, sizeof text, pattern, values...);
  return used > 0 ? text : "";
}

}  // namespace

void Parallelized::register_moe_balancing() {
  if (full_config_.num_experts == 0) return;
  // torchtitan's register_moe_load_balancing_hook: after the optimizer's update, the routers' bias
  // moves toward the step's underloaded experts (from the load finish_grads summed over dp), and
  // the load starts again from 0 for the next step.
  if (full_config_.load_balance == nn::LoadBalance::bias) {
    add_post_step_hook([this] { model_->update_expert_bias(); });
  } else {
    add_post_step_hook([this] { model_->reset_expert_load(); });
  }
}

void Parallelized::post_step() {
  for (const std::function<void()>& hook : post_step_hooks_) hook();
}

// The metrics.jsonl fields of a step of an MoE as they have always been written: expert_load_min,
// expert_load_max, aux_loss (0 without aux-loss balancing), then ep_rank_load with expert parallelism;
// on the console "  expert_load: 58..71  aux: 0.0123  ep_load: 812/724".
std::vector<nn::StepMetric> Parallelized::step_metrics(const std::vector<nn::LossValue>& losses) {
  std::vector<nn::StepMetric> out;
  const nn::ExpertLoad load = expert_load();
  const std::vector<int64_t> ep_loads = ep_rank_loads();
  if (load.defined) {
    double aux = 0.0;
    for (const nn::LossValue& l : losses) {
      if (l.name == nn::kAuxLossTerm) aux = l.value;
    }
    out.push_back({"expert_load_min", load.min, "moe/expert_load_min",
                   formatted("  expert_load: %lld..%lld", static_cast<long long>(load.min),
                          static_cast<long long>(load.max))});
    out.push_back({"expert_load_max", load.max, "moe/expert_load_max", ""});
    out.push_back({std::string(nn::kAuxLossTerm), aux, "moe/aux_loss", formatted("  aux: %.4f", aux)});
  }
  if (!ep_loads.empty()) {
    std::string text;
    for (size_t r = 0; r < ep_loads.size(); ++r) text += str(r == 0 ? "  ep_load: " : "/", ep_loads[r]);
    out.push_back({"ep_rank_load", ep_loads, "", text});
  }
  return out;
}

// Rows each ep rank's experts processed: this rank's MoE layers' loads (already summed over dp by
// finish_grads), grouped by the ep rank holding each expert, summed over the pipeline's stages.
std::vector<int64_t> Parallelized::ep_rank_loads() {
  if (!ep_) return {};
  const int64_t ep = ep_degree(), local = full_config_.num_experts / ep;
  std::vector<int64_t> loads(static_cast<size_t>(ep), 0);
  for (auto& layer : model_->layers) {
    if (!layer->moe) continue;
    const std::vector<int64_t>& load = layer->moe->load();
    for (size_t e = 0; e < load.size(); ++e) loads[e / static_cast<size_t>(local)] += load[e];
  }
  if (pipeline_) mesh_.pp().all_reduce_sum(std::span<int64_t>(loads.data(), static_cast<size_t>(ep)));  // every stage's MoE layers
  return loads;
}

nn::ExpertLoad Parallelized::expert_load() {
  nn::ExpertLoad load = model_->expert_load();
  if (!pipeline_ || full_config_.num_experts == 0) return load;
  // Every stage takes part (one may hold no MoE layer: -inf for both, which any defined load beats).
  const double none = -std::numeric_limits<double>::infinity();
  double extremes[2] = {load.defined ? -static_cast<double>(load.min) : none,
                        load.defined ? static_cast<double>(load.max) : none};
  mesh_.pp().all_reduce_max(std::span<double>(extremes));
  load.defined = extremes[1] != none;
  if (load.defined) {
    load.min = static_cast<int64_t>(-extremes[0]);
    load.max = static_cast<int64_t>(extremes[1]);
  }
  return load;
}

}  // namespace titan::models
