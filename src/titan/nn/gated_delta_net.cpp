#include "titan/nn/gated_delta_net.h"

#include "titan/ops/delta_gates/delta_gates.h"
#include "titan/ops/rows/rows.h"
#include "titan/ops/swiglu/swiglu.h"

namespace titan::nn {

GatedDeltaNet::GatedDeltaNet(const GatedDeltaNetConfig& config, const ModuleBuild& build)
    : in_proj_qkv(build.child<LinearModule>("in_proj_qkv")),
      in_proj_z(build.child<LinearModule>("in_proj_z")),
      in_proj_b(build.child<LinearModule>("in_proj_b")),
      in_proj_a(build.child<LinearModule>("in_proj_a")),
      out_proj(build.child<LinearModule>("out_proj")),
      norm(build.child<RmsNormModule>("norm")),
      config_(config) {
  const std::string fqn = build.fqn();
  conv1d.init(fqn + ".conv1d.weight", {config.conv_channels(), config.conv_kernel}, parameter_device());
  a_log.init(fqn + ".A_log", {config.v_heads}, parameter_device());
  dt_bias.init(fqn + ".dt_bias", {config.v_heads}, parameter_device());
  Tensor ones = Tensor::empty({config.v_heads});
  ones.fill_(1.0f);
  dt_bias.data().copy_from(ones);  // Transformers' initial value; A_log = 0 (A = 1) until init
}

ops::GatedDeltaArgs GatedDeltaNet::delta_args() const {
  return {config_.k_heads, config_.k_dim, config_.v_heads, config_.v_dim};
}

void GatedDeltaNet::check(int64_t batch, int64_t seq) const { norm->check(batch, seq); }

Tensor GatedDeltaNet::forward(const StepContext& ctx, const Tensor& x_ND, std::any& saved) const {
  Saved& s = saved.emplace<Saved>();
  const GatedDeltaNetConfig& c = config_;
  const int64_t B = ctx.batch, T = ctx.seq, N = B * T;
  const Device device = x_ND.device();
  const Tensor x_in = in_proj_qkv->compute_input(x_ND);  // cast once for the four projections
  s.qkv_BTC = in_proj_qkv->forward(x_in, s.qkv_proj).reshape({B, T, c.conv_channels()});
  s.z_NV = in_proj_z->forward(x_in, s.z_proj);
  s.b_NH = in_proj_b->forward(x_in, s.b_proj);
  s.a_NH = in_proj_a->forward(x_in, s.a_proj);
  s.mixed_BTC = Tensor::empty(s.qkv_BTC.shape(), DType::f32, device);
  Tensor no_state;
  ops::causal_conv1d_forward({true}, s.qkv_BTC, conv1d.for_compute_f32(), s.mixed_BTC, no_state);
  s.g_BTH = Tensor::empty({B, T, c.v_heads}, DType::f32, device);
  s.beta_BTH = Tensor::empty({B, T, c.v_heads}, DType::f32, device);
  Tensor g_NH = s.g_BTH.reshape({N, c.v_heads}), beta_NH = s.beta_BTH.reshape({N, c.v_heads});
  ops::delta_gates_forward(s.a_NH, s.b_NH, a_log.for_compute_f32(), dt_bias.for_compute_f32(), g_NH, beta_NH);
  Tensor o_BTV = Tensor::empty({B, T, c.value_width()}, DType::f32, device);
  ops::gated_delta_forward(delta_args(), s.mixed_BTC, s.g_BTH, s.beta_BTH, o_BTV, no_state);
  // The gated RMSNorm per value head: norm(o) * silu(z).
  s.normed_MV = norm->forward(o_BTV.reshape({N * c.v_heads, c.v_dim}), s.norm);
  Tensor gated_MV = Tensor::empty(s.normed_MV.shape(), DType::f32, device);
  ops::swiglu_forward(s.z_NV.reshape({N * c.v_heads, c.v_dim}), s.normed_MV, gated_MV);
  return out_proj->forward(gated_MV.reshape({N, c.value_width()}), s.out_proj);
}

Tensor GatedDeltaNet::forward_cached(const StepContext& ctx, const Tensor& x_ND, KvCache& cache, int64_t layer) const {
  const GatedDeltaNetConfig& c = config_;
  const int64_t B = ctx.batch, S = ctx.seq, N = B * S;
  const Device device = x_ND.device();
  Tensor& conv_state = cache.conv_BSC[static_cast<size_t>(layer)];
  Tensor& delta_state = cache.state_BHKV[static_cast<size_t>(layer)];
  TITAN_CHECK(conv_state.defined() && delta_state.defined(), "[gated_delta_net] layer ", layer,
              " has no recurrent state in the cache. HINT: make the cache with Decoder::make_kv_cache");
  Tensor x = x_ND.clone();
  if (ctx.padding_N.defined()) ops::rows_mask(ctx.padding_N, x);
  LinearModule::Saved scratch;  // nothing is kept for a backward
  const Tensor x_in = in_proj_qkv->compute_input(x);
  const Tensor qkv = in_proj_qkv->forward(x_in, scratch).reshape({B, S, c.conv_channels()});
  const Tensor z = in_proj_z->forward(x_in, scratch), b = in_proj_b->forward(x_in, scratch);
  const Tensor a = in_proj_a->forward(x_in, scratch);
  Tensor mixed = Tensor::empty(qkv.shape(), DType::f32, device);
  ops::causal_conv1d_forward({true}, qkv, conv1d.for_compute_f32(), mixed, conv_state);
  Tensor g = Tensor::empty({B, S, c.v_heads}, DType::f32, device), beta = Tensor::empty({B, S, c.v_heads}, DType::f32, device);
  Tensor g_NH = g.reshape({N, c.v_heads}), beta_NH = beta.reshape({N, c.v_heads});
  ops::delta_gates_forward(a, b, a_log.for_compute_f32(), dt_bias.for_compute_f32(), g_NH, beta_NH);
  Tensor o = Tensor::empty({B, S, c.value_width()}, DType::f32, device);
  ops::gated_delta_forward(delta_args(), mixed, g, beta, o, delta_state);
  std::any norm_scratch;
  const Tensor normed = norm->forward(o.reshape({N * c.v_heads, c.v_dim}), norm_scratch);
  Tensor gated = Tensor::empty(normed.shape(), DType::f32, device);
  ops::swiglu_forward(z.reshape({N * c.v_heads, c.v_dim}), normed, gated);
  return out_proj->forward(gated.reshape({N, c.value_width()}), scratch);
}

Tensor GatedDeltaNet::backward(const StepContext& ctx, const Tensor& dy_ND, std::any& saved) {
  Saved& s = std::any_cast<Saved&>(saved);
  const GatedDeltaNetConfig& c = config_;
  const int64_t B = ctx.batch, T = ctx.seq, N = B * T, M = N * c.v_heads;
  const Device device = dy_ND.device();
  const Tensor dgated_MV = out_proj->backward(dy_ND, s.out_proj).reshape({M, c.v_dim});
  Tensor dz_MV = Tensor::empty({M, c.v_dim}, DType::f32, device), dnormed_MV = Tensor::empty({M, c.v_dim}, DType::f32, device);
  ops::swiglu_backward(dgated_MV, s.z_NV.reshape({M, c.v_dim}), s.normed_MV, dz_MV, dnormed_MV);
  s.z_NV = s.normed_MV = Tensor();
  const Tensor do_BTV = norm->backward(dnormed_MV, s.norm).reshape({B, T, c.value_width()});
  Tensor dmixed_BTC = Tensor::empty(s.mixed_BTC.shape(), DType::f32, device);
  Tensor dg_BTH = Tensor::empty(s.g_BTH.shape(), DType::f32, device);
  Tensor dbeta_BTH = Tensor::empty(s.beta_BTH.shape(), DType::f32, device);
  ops::gated_delta_backward(delta_args(), do_BTV, s.mixed_BTC, s.g_BTH, s.beta_BTH, dmixed_BTC, dg_BTH, dbeta_BTH);
  s.mixed_BTC = s.g_BTH = s.beta_BTH = Tensor();
  Tensor da_NH = Tensor::empty(s.a_NH.shape(), DType::f32, device), db_NH = Tensor::empty(s.b_NH.shape(), DType::f32, device);
  Tensor da_log = a_log.grad_sink(), ddt_bias = dt_bias.grad_sink();
  ops::delta_gates_backward(dg_BTH.reshape({N, c.v_heads}), dbeta_BTH.reshape({N, c.v_heads}), s.a_NH, s.b_NH,
                            a_log.for_compute_f32(), dt_bias.for_compute_f32(), da_NH, db_NH, da_log, ddt_bias);
  Tensor dqkv_BTC = Tensor::empty(s.qkv_BTC.shape(), DType::f32, device), dconv = conv1d.grad_sink();
  ops::causal_conv1d_backward({true}, dmixed_BTC, s.qkv_BTC, conv1d.for_compute_f32(), dqkv_BTC, dconv);
  Tensor dx_ND = in_proj_qkv->backward(dqkv_BTC.reshape({N, c.conv_channels()}), s.qkv_proj);
  add_inplace(dx_ND, in_proj_z->backward(dz_MV.reshape({N, c.value_width()}), s.z_proj));
  add_inplace(dx_ND, in_proj_b->backward(db_NH, s.b_proj));
  add_inplace(dx_ND, in_proj_a->backward(da_NH, s.a_proj));
  saved.reset();
  return dx_ND;
}

void GatedDeltaNet::collect(ParameterList& out) {
  in_proj_qkv->collect(out);
  in_proj_z->collect(out);
  in_proj_b->collect(out);
  in_proj_a->collect(out);
  out.push_back(&conv1d);
  out.push_back(&a_log);
  out.push_back(&dt_bias);
  norm->collect(out);
  out_proj->collect(out);
}

// The nodes of a GatedDeltaNet at `path` ("model.layers.0.attention"): itself and its children.
void add_gated_delta_net_nodes(ConfigTree& tree, const std::string& path, const GatedDeltaNetConfig& c) {
  tree[path] = std::make_shared<GatedDeltaNetConfig>(c);
  tree[path + ".in_proj_qkv"] = std::make_shared<LinearConfig>(c.dim, c.conv_channels(), false);
  tree[path + ".in_proj_z"] = std::make_shared<LinearConfig>(c.dim, c.value_width(), false);
  tree[path + ".in_proj_b"] = std::make_shared<LinearConfig>(c.dim, c.v_heads, false);
  tree[path + ".in_proj_a"] = std::make_shared<LinearConfig>(c.dim, c.v_heads, false);
  tree[path + ".out_proj"] = std::make_shared<LinearConfig>(c.value_width(), c.dim, false);
  tree[path + ".norm"] = std::make_shared<RmsNormConfig>(c.v_dim, c.norm_eps);
}

}  // namespace titan::nn
