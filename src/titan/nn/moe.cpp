#include "titan/nn/moe.h"

#include <cmath>

#include "titan/ops/moe_combine/moe_combine.h"

namespace titan::nn {

void MoeModule::drop_recomputable(std::any&) const {}
void MoeModule::recompute(const Tensor&, std::any&) const {}

Moe::Moe(const MoeConfig& config, const ModuleBuild& build)
    : router(build.child<RouterModule>("router")), experts(build.child<ExpertsModule>("experts")), config_(config) {}

void Moe::drop_recomputable(std::any& saved) const { std::any_cast<Saved&>(saved).x_ND = Tensor(); }
void Moe::recompute(const Tensor& x_ND, std::any& saved) const { std::any_cast<Saved&>(saved).x_ND = x_ND; }

void Moe::check(int64_t batch, int64_t seq) const {
  router->check(batch, seq);
  experts->check(batch, seq);
}

// router -> dispatch -> experts -> combine (the combine applies the routing weights).
Tensor Moe::forward(const Tensor& x_ND, std::any& saved, RouterTotals* totals) {
  Saved& s = saved.emplace<Saved>();
  const int64_t n = x_ND.size(0), e = config_.num_experts;
  s.x_ND = x_ND;
  router->forward(x_ND, s.routing);
  Tensor x_PD = Tensor::empty({n * config_.top_k, config_.dim}, DType::f32, x_ND.device());
  ops::moe_dispatch_forward({e}, x_ND, s.routing.expert_NK, x_PD, s.layout);
  const Tensor y_PD = experts->forward(x_PD, s.layout.offsets_E1, s.experts);
  Tensor out_ND = Tensor::empty({n, config_.dim}, DType::f32, x_ND.device());
  ops::moe_combine_forward(y_PD, s.routing.weight_NK, s.layout.row_of_pair_NK, out_ND);
  if (totals == nullptr) return out_ND;
  const int64_t* counts = s.routing.expert_counts_E.data<int64_t>();
  std::vector<int64_t>& load_E = router->load();
  for (size_t j = 0; j < load_E.size(); ++j) load_E[j] += counts[j];
  if (config_.load_balance == LoadBalance::aux_loss) {
    const auto ue = static_cast<size_t>(e);
    totals->counts_E.resize(ue, 0.0);
    totals->prob_sums_E.resize(ue, 0.0);
    const float* p = s.routing.probs_NE.data<float>();
    for (size_t j = 0; j < ue; ++j) totals->counts_E[j] += static_cast<double>(counts[j]);
    for (int64_t t = 0; t < n; ++t) {
      for (size_t j = 0; j < ue; ++j) totals->prob_sums_E[j] += p[static_cast<size_t>(t) * ue + j];
    }
    totals->rows += n;
  }
  return out_ND;
}

// Softmax backward of the aux gradient q = dprobs (the same for every token):
// dz_j = p_j (q_j - sum_i p_i q_i).
static Tensor aux_logit_grad(const Tensor& probs_NE, const std::vector<double>& dprobs_E) {
  const int64_t n = probs_NE.size(0), e = probs_NE.size(1);
  Tensor dz_NE = Tensor::empty({n, e}, DType::f32, Device::cpu);  // filled on the host
  const float* p = probs_NE.data<float>();
  float* dz = dz_NE.data<float>();
  for (int64_t t = 0; t < n; ++t) {
    double pq = 0.0;
    for (int64_t j = 0; j < e; ++j) pq += p[t * e + j] * dprobs_E[static_cast<size_t>(j)];
    for (int64_t j = 0; j < e; ++j) {
      dz[t * e + j] = static_cast<float>(p[t * e + j] * (dprobs_E[static_cast<size_t>(j)] - pq));
    }
  }
  return dz_NE;
}

// The forward's ops backwards (ops/moe/moe.md): combine's unweighted backward gathers dout per
// row; the experts' backward applies the routing weights and gives dweight; the router writes dx,
// then dispatch's backward adds each token's rows.
Tensor Moe::backward(const StepContext& ctx, const Tensor& dy_ND, std::any& saved) {
  Saved& s = std::any_cast<Saved&>(saved);
  const int64_t n = s.x_ND.size(0), e = config_.num_experts, p = n * config_.top_k, d = config_.dim;
  const Device dev = s.x_ND.device();
  const Tensor drouter_logits_NE =
      ctx.moe_aux_dprobs_E.empty() ? Tensor() : aux_logit_grad(s.routing.probs_NE, ctx.moe_aux_dprobs_E);
  Tensor g_PD = Tensor::empty({p, d}, DType::f32, dev), none;
  ops::moe_combine_backward(dy_ND, Tensor{}, Tensor{}, s.layout.row_of_pair_NK, g_PD, none);
  // The dispatch rows again (not saved); the layout it recomputes equals the saved one.
  Tensor x_PD = Tensor::empty({p, d}, DType::f32, dev);
  ops::MoeLayout layout;
  ops::moe_dispatch_forward({e}, s.x_ND, s.routing.expert_NK, x_PD, layout);
  Tensor& dx_PD = g_PD;  // written in place: one [P, D] buffer fewer
  Tensor dweight_NK = Tensor::empty({n, config_.top_k}, DType::f32, dev);
  experts->backward(g_PD, s.routing.weight_NK, s.layout.pair_of_row_P, x_PD, s.layout.offsets_E1, s.experts, dx_PD,
                    dweight_NK);
  x_PD = Tensor();
  Tensor dx_ND = Tensor::empty(s.x_ND.shape(), DType::f32, dev);
  router->backward(dweight_NK, drouter_logits_NE, s.x_ND, s.routing, dx_ND);
  ops::moe_dispatch_backward({e}, dx_PD, s.layout, dx_ND);
  saved.reset();
  return dx_ND;
}

void Moe::collect(ParameterList& out) {
  router->collect(out);
  experts->collect(out);
}

void Moe::collect_buffers(ParameterList& out) { router->collect_buffers(out); }

}  // namespace titan::nn
