#include "titan/nn/moe_router.h"

#include "titan/ops/moe_bias/moe_bias.h"

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

Router::Router(const RouterConfig& config, const std::string& fqn)
    : config_(config), load_E_(static_cast<size_t>(config.num_experts), 0) {
  gate.init(fqn + ".gate.weight", {config.num_experts, config.dim}, parameter_device());
  if (config.load_balance == LoadBalance::bias) {
    expert_bias.fqn = fqn.substr(0, fqn.rfind('.')) + ".expert_bias";
    expert_bias.value = Tensor::zeros({config.num_experts}, DType::f32, parameter_device());
  }
  args_.top_k = config.top_k;
  args_.norm_topk_prob = config.norm_topk_prob;
  args_.selection_bias_E = expert_bias.value;
}

void Router::forward(const Tensor& x_ND, ops::MoeRouting& routing) const {
  Tensor logits_NE = Tensor::empty({x_ND.size(0), config_.num_experts}, DType::f32, x_ND.device());
  ops::moe_router_forward(args_, x_ND, gate.for_compute_f32(), logits_NE, routing);  // the router stays f32
}

void Router::backward(const Tensor& dweight_NK, const Tensor& dlogits_NE, const Tensor& x_ND,
                      const ops::MoeRouting& routing, Tensor& dx_ND) {
  Tensor dgate = gate.grad_sink();
  ops::moe_router_backward(args_, dweight_NK, dlogits_NE, x_ND, gate.for_compute_f32(), routing, dx_ND, dgate);
}

void Router::collect_buffers(ParameterList& out) {
  if (expert_bias.defined()) out.push_back(&expert_bias);
}

void Router::update_expert_bias(double rate) {
  if (!expert_bias.defined()) return;
  // The load is a host vector; the op sees it as a tensor over its memory (a meta run's bias has no
  // values, and its load none either: a meta tensor of its shape).
  const Shape shape{static_cast<int64_t>(load_E_.size())};
  const Tensor load_E = expert_bias.value.is_meta() ? Tensor::empty(shape, DType::i64, Device::meta)
                                                    : Tensor::wrap(load_E_.data(), shape, DType::i64, nullptr);
  ops::moe_bias_update(load_E, rate, expert_bias.value);
}

}  // namespace titan::nn
