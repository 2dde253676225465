#include "titan/nn/moe.h"

#include <cmath>

#include "titan/core/error.h"
#include "titan/ops/moe_combine/moe_combine.h"
#include "titan/ops/moe_load/moe_load.h"
#include "titan/ops/positions/positions.h"
#include "titan/ops/rows/rows.h"
#include "titan/ops/sigmoid_gate/sigmoid_gate.h"

namespace titan::nn {

// A tensor over a host vector's memory (no copy; the vector must outlive it and keep its size). In
// a meta run (the activations on meta) a meta tensor of its shape: the totals get no values there.
template <class T>
static Tensor host_view(const std::vector<T>& v, Device device) {
  constexpr DType dtype = std::is_same_v<T, double> ? DType::f64 : DType::i64;
  const Shape shape{static_cast<int64_t>(v.size())};
  if (device == Device::meta) return Tensor::empty(shape, dtype, device);
  return Tensor::wrap(const_cast<T*>(v.data()), shape, dtype, nullptr);
}

void MoeModule::drop_recomputable(std::any&) const {}
void MoeModule::recompute(const Tensor&, std::any&) const {}
void MoeModule::collect_experts(ParameterList&) {}

void MoeModule::set_expert_parallel(ExpertParallelOps*) {
  TITAN_FAIL("[parallel] ", describe(), " cannot be split over experts. HINT: use parallelism.expert_parallel_degree "
             "= 1 with this MoE override");
}

void Moe::set_expert_parallel(ExpertParallelOps* ep) {
  const int64_t local = config_.num_experts / ep->degree();
  experts->keep_experts(ep->rank() * local, local);
  ep_ = ep;
}

Moe::Moe(const MoeConfig& config, const ModuleBuild& build)
    : router(build.child<RouterModule>("router")), experts(build.child<ExpertsModule>("experts")), config_(config) {
  if (config.shared_expert_dim > 0) {
    shared_expert = build.child<FeedForwardModule>("shared_expert");
    shared_expert_gate = build.child<LinearModule>("shared_expert_gate");
  }
}

void Moe::drop_recomputable(std::any& saved) const {
  Saved& s = std::any_cast<Saved&>(saved);
  s.x_ND = Tensor();
  if (shared_expert) {
    shared_expert->drop_recomputable(s.shared);
    s.gate = {};
  }
}

void Moe::recompute(const Tensor& x_ND, std::any& saved) const {
  Saved& s = std::any_cast<Saved&>(saved);
  s.x_ND = x_ND;
  if (shared_expert) {
    shared_expert->recompute(x_ND, s.shared);
    s.gate.x_NI = shared_expert_gate->compute_input(x_ND);
  }
}

void Moe::check(int64_t batch, int64_t seq) const {
  router->check(batch, seq);
  experts->check(batch, seq);
  if (shared_expert) shared_expert->check(batch, seq);
}

// router -> dispatch -> experts -> combine (the combine applies the routing weights).
Tensor Moe::forward(const Tensor& x_ND, std::any& saved, RouterTotals* totals) {
  Saved& s = saved.emplace<Saved>();
  const int64_t n = x_ND.size(0), e = config_.num_experts;
  s.x_ND = x_ND;
  router->forward(x_ND, s.routing);
  Tensor x_PD = Tensor::empty({n * config_.top_k, config_.dim}, DType::f32, x_ND.device());
  ops::moe_dispatch_forward({e}, x_ND, s.routing.expert_NK, x_PD, s.layout);
  const Tensor y_PD = experts_forward(x_PD, s);
  Tensor out_ND = Tensor::empty({n, config_.dim}, DType::f32, x_ND.device());
  ops::moe_combine_forward(y_PD, s.routing.weight_NK, s.layout.row_of_pair_NK, out_ND);
  if (shared_expert) {  // + sigmoid(gate(x)) * shared_expert(x)
    s.shared_ND = shared_expert->forward(x_ND, s.shared);
    s.gate_N1 = shared_expert_gate->forward(x_ND, s.gate);
    Tensor gated_ND = Tensor::empty({n, config_.dim}, DType::f32, x_ND.device());
    ops::sigmoid_gate_forward(s.shared_ND, s.gate_N1, gated_ND);
    add_inplace(out_ND, gated_ND);
  }
  if (totals == nullptr) return out_ND;
  // The running totals are host vectors (the router's load, the decoder's RouterTotals), seen by
  // the op as tensors over their memory.
  const Device dev = x_ND.device();
  Tensor load_E = host_view(router->load(), dev), count_sums_E, prob_sums_E;
  const bool aux = config_.load_balance == LoadBalance::aux_loss;
  if (aux) {
    totals->counts_E.resize(static_cast<size_t>(e), 0.0);
    totals->prob_sums_E.resize(static_cast<size_t>(e), 0.0);
    count_sums_E = host_view(totals->counts_E, dev);
    prob_sums_E = host_view(totals->prob_sums_E, dev);
  }
  ops::moe_load_forward(s.routing.expert_counts_E, s.routing.probs_NE, load_E, count_sums_E, prob_sums_E);
  if (aux) totals->rows += n;
  return out_ND;
}

// On one rank the experts run on the dispatch rows; under expert parallelism the rows go to their
// experts' ranks and come back (nn/expert_parallel.h).
Tensor Moe::experts_forward(const Tensor& x_PD, Saved& s) const {
  if (ep_ == nullptr) return experts->forward(x_PD, s.layout.offsets_E1, s.experts);
  s.exchange = ep_->plan(s.routing.expert_counts_E, x_PD.size(0));
  s.x_RD = ep_->to_experts(x_PD, s.exchange);
  const Tensor y_RD = experts->forward(s.x_RD, s.exchange.offsets_E1, s.experts);
  return ep_->from_experts(y_RD, s.exchange);
}

// The forward's ops backwards (ops/moe/moe.md): combine's unweighted backward gathers dout per
// row; the experts' backward applies the routing weights and gives dweight; the router writes dx,
// then dispatch's backward adds each token's rows.
Tensor Moe::backward(const StepContext& ctx, const Tensor& dy_ND, std::any& saved) {
  Saved& s = std::any_cast<Saved&>(saved);
  const int64_t n = s.x_ND.size(0), e = config_.num_experts, p = n * config_.top_k, d = config_.dim;
  const Device dev = s.x_ND.device();
  Tensor drouter_logits_NE;  // the aux loss's gradient onto the router logits, when it has one
  if (!ctx.moe_aux_dprobs_E.empty()) {
    drouter_logits_NE = Tensor::empty(s.routing.probs_NE.shape(), DType::f32, dev);
    ops::moe_load_backward(s.routing.probs_NE, host_view(ctx.moe_aux_dprobs_E, dev), drouter_logits_NE);
  }
  Tensor g_PD = Tensor::empty({p, d}, DType::f32, dev), none;
  ops::moe_combine_backward(dy_ND, Tensor{}, Tensor{}, s.layout.row_of_pair_NK, g_PD, none);
  Tensor dweight_NK = Tensor::empty({n, config_.top_k}, DType::f32, dev);
  experts_backward(g_PD, s, dweight_NK);
  const Tensor& dx_PD = g_PD;  // written in place: one [P, D] buffer fewer
  Tensor dx_ND = Tensor::empty(s.x_ND.shape(), DType::f32, dev);
  router->backward(dweight_NK, drouter_logits_NE, s.x_ND, s.routing, dx_ND);
  ops::moe_dispatch_backward({e}, dx_PD, s.layout, dx_ND);
  if (shared_expert) {
    Tensor dshared_ND = Tensor::empty(s.shared_ND.shape(), DType::f32, dev);
    Tensor dgate_N1 = Tensor::empty(s.gate_N1.shape(), DType::f32, dev);
    ops::sigmoid_gate_backward(dy_ND, s.shared_ND, s.gate_N1, dshared_ND, dgate_N1);
    s.shared_ND = s.gate_N1 = Tensor();
    add_inplace(dx_ND, shared_expert->backward(dshared_ND, s.shared));
    add_inplace(dx_ND, shared_expert_gate->backward(dgate_N1, s.gate));
  }
  saved.reset();
  return dx_ND;
}

// g_PD: the gradient of the weighted dispatch rows in, their dx out (in place); dweight_NK written.
void Moe::experts_backward(Tensor& g_PD, Saved& s, Tensor& dweight_NK) {
  if (ep_ != nullptr) return experts_backward_ep(g_PD, s, dweight_NK);
  // The dispatch rows again (not saved); the layout it recomputes equals the saved one.
  Tensor x_PD = Tensor::empty(g_PD.shape(), DType::f32, g_PD.device());
  ops::MoeLayout layout;
  ops::moe_dispatch_forward({config_.num_experts}, s.x_ND, s.routing.expert_NK, x_PD, layout);
  experts->backward(g_PD, s.routing.weight_NK, s.layout.pair_of_row_P, x_PD, s.layout.offsets_E1, s.experts, g_PD,
                    dweight_NK);
}

// The same across ranks: each row's gradient and routing weight go to its expert's rank (the
// experts apply the weights in backward), which computes the row's dx and dweight (row r of the
// received rows is its own "pair" r) and the expert weights' gradients from every rank's rows;
// dx and dweight come back to the rows' ranks.
void Moe::experts_backward_ep(Tensor& g_PD, Saved& s, Tensor& dweight_NK) {
  const int64_t p = g_PD.size(0), r = s.exchange.num_rows;
  const Device dev = g_PD.device();
  Tensor weight_P1 = Tensor::empty({p, 1}, DType::f32, dev);  // each row's routing weight
  ops::rows_gather_forward(s.routing.weight_NK.reshape({p, 1}), s.layout.pair_of_row_P, weight_P1);
  Tensor g_RD = ep_->to_experts(g_PD, s.exchange);
  const Tensor weight_R1 = ep_->to_experts(weight_P1, s.exchange);
  Tensor own_pair_R = Tensor::empty({r}, DType::i32, dev);
  ops::positions_forward({1, r, 0}, Tensor(), own_pair_R);  // 0, 1, ..., r - 1
  Tensor dweight_R1 = Tensor::empty({r, 1}, DType::f32, dev);
  experts->backward(g_RD, weight_R1, own_pair_R, s.x_RD, s.exchange.offsets_E1, s.experts, g_RD, dweight_R1);
  s.x_RD = Tensor();
  g_PD = ep_->from_experts(g_RD, s.exchange);
  const Tensor dweight_P1 = ep_->from_experts(dweight_R1, s.exchange);
  Tensor dweight_P1_of_pairs = dweight_NK.reshape({p, 1});  // pair_of_row is a permutation: every pair written
  ops::rows_gather_backward(dweight_P1, s.layout.pair_of_row_P, dweight_P1_of_pairs);
}

void Moe::collect(ParameterList& out) {
  router->collect(out);
  experts->collect(out);
  if (shared_expert) {
    shared_expert->collect(out);
    shared_expert_gate->collect(out);
  }
}

void Moe::collect_buffers(ParameterList& out) { router->collect_buffers(out); }

}  // namespace titan::nn
