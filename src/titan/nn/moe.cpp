#include "titan/nn/moe.h"

#include <cmath>

namespace titan::nn {

const char* load_balance_name(LoadBalance b) {
  switch (b) {
    case LoadBalance::none: return "none";
    case LoadBalance::aux_loss: return "aux_loss";
    case LoadBalance::bias: return "bias";
  }
  return "?";
}

LoadBalance parse_load_balance(const std::string& name) {
  for (LoadBalance b : {LoadBalance::none, LoadBalance::aux_loss, LoadBalance::bias}) {
    if (name == load_balance_name(b)) return b;
  }
  TITAN_FAIL("[model] load balancing '", name, "' is not one of none, aux_loss, bias");
}

Moe::Moe(const MoeConfig& config, const std::string& fqn)
    : config_(config), load_E_(static_cast<size_t>(config.num_experts), 0) {
  const int64_t e = config.num_experts, f = config.hidden_dim, d = config.dim;
  router.init(fqn + ".router.gate.weight", {e, d}, kParameterDevice);
  w1.init(fqn + ".experts.w1", {e, f, d}, kParameterDevice);
  w2.init(fqn + ".experts.w2", {e, d, f}, kParameterDevice);
  w3.init(fqn + ".experts.w3", {e, f, d}, kParameterDevice);
  if (config.load_balance == LoadBalance::bias) {
    expert_bias.fqn = fqn + ".expert_bias";
    expert_bias.value = Tensor::zeros({e}, DType::f32, kParameterDevice);
  }
  args_.top_k = config.top_k;
  args_.norm_topk_prob = config.norm_topk_prob;
  args_.selection_bias_E = expert_bias.value;
}

void MoeModule::drop_recomputable(std::any&) const {}
void MoeModule::recompute(const Tensor&, std::any&) const {}

void Moe::drop_recomputable(std::any& saved) const { std::any_cast<Saved&>(saved).x_ND = Tensor(); }
void Moe::recompute(const Tensor& x_ND, std::any& saved) const { std::any_cast<Saved&>(saved).x_ND = x_ND; }

Tensor Moe::forward(const Tensor& x_ND, std::any& saved, RouterTotals* totals) {
  Saved& s = saved.emplace<Saved>();
  const int64_t n = x_ND.size(0);
  Tensor out_ND = Tensor::empty({n, config_.dim}, DType::f32, x_ND.device());
  Tensor logits_NE = Tensor::empty({n, config_.num_experts}, DType::f32, x_ND.device());
  ops::moe_forward(args_, x_ND, router.value, w1.value, w3.value, w2.value, out_ND, logits_NE, s.op);
  s.x_ND = x_ND;
  if (totals == nullptr) return out_ND;
  const int64_t* counts = s.op.expert_counts_E.data<int64_t>();
  for (size_t j = 0; j < load_E_.size(); ++j) load_E_[j] += counts[j];
  if (config_.load_balance == LoadBalance::aux_loss) {
    const auto e = static_cast<size_t>(config_.num_experts);
    totals->counts_E.resize(e, 0.0);
    totals->prob_sums_E.resize(e, 0.0);
    const float* p = s.op.probs_NE.data<float>();
    for (size_t j = 0; j < e; ++j) totals->counts_E[j] += static_cast<double>(counts[j]);
    for (int64_t t = 0; t < n; ++t) {
      for (size_t j = 0; j < e; ++j) totals->prob_sums_E[j] += p[static_cast<size_t>(t) * e + j];
    }
    totals->rows += n;
  }
  return out_ND;
}

Tensor Moe::backward(const StepContext& ctx, const Tensor& dy_ND, std::any& saved) {
  Saved& s = std::any_cast<Saved&>(saved);
  const int64_t n = s.x_ND.size(0), e = config_.num_experts;
  const std::vector<double>& aux_dprobs_E = ctx.moe_aux_dprobs_E;
  Tensor drouter_logits_NE;
  if (!aux_dprobs_E.empty()) {
    // Softmax backward of the aux gradient: dz_j = p_j (q_j - sum_i p_i q_i), q = dprobs.
    drouter_logits_NE = Tensor::empty({n, e}, DType::f32, Device::cpu);  // filled on the host below
    const float* p = s.op.probs_NE.data<float>();
    float* dz = drouter_logits_NE.data<float>();
    for (int64_t t = 0; t < n; ++t) {
      double pq = 0.0;
      for (int64_t j = 0; j < e; ++j) pq += p[t * e + j] * aux_dprobs_E[static_cast<size_t>(j)];
      for (int64_t j = 0; j < e; ++j) {
        dz[t * e + j] = static_cast<float>(p[t * e + j] * (aux_dprobs_E[static_cast<size_t>(j)] - pq));
      }
    }
  }
  Tensor dx_ND = Tensor::empty(s.x_ND.shape(), DType::f32, s.x_ND.device());
  ops::moe_backward(args_, dy_ND, drouter_logits_NE, s.x_ND, router.value, w1.value, w3.value, w2.value, s.op,
                    dx_ND, router.grad, w1.grad, w3.grad, w2.grad);
  saved.reset();
  return dx_ND;
}

void Moe::collect(ParameterList& out) {
  out.push_back(&router);
  out.push_back(&w1);
  out.push_back(&w2);
  out.push_back(&w3);
}

void Moe::collect_buffers(ParameterList& out) {
  if (expert_bias.defined()) out.push_back(&expert_bias);
}

void Moe::update_expert_bias(double rate) {
  if (!expert_bias.defined()) return;
  const size_t e = load_E_.size();
  double mean = 0.0;
  for (int64_t c : load_E_) mean += static_cast<double>(c);
  mean /= static_cast<double>(e);
  std::vector<double> delta(e);
  double delta_mean = 0.0;
  for (size_t j = 0; j < e; ++j) {
    const double gap = mean - static_cast<double>(load_E_[j]);
    delta[j] = rate * static_cast<double>((gap > 0) - (gap < 0));
    delta_mean += delta[j] / static_cast<double>(e);
  }
  float* bias = expert_bias.value.data<float>();
  for (size_t j = 0; j < e; ++j) bias[j] += static_cast<float>(delta[j] - delta_mean);
}

}  // namespace titan::nn
