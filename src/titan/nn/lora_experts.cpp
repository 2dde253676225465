// LoRA on stacked experts (nn/lora.h, LoraExperts): PEFT's ParamWrapper math on titan's grouped
// experts, the per-expert low-rank products as small GEMMs (ops/matmul).
#include <cmath>

#include "titan/core/error.h"
#include "titan/nn/lora.h"
#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/matmul/linear.h"

namespace titan::nn {

namespace {

// Expert e's B_e [out, R], f32, out of PEFT's lora_B [out, R E] (its columns k E + e).
Tensor expert_b(const Tensor& b_OX, int64_t e, int64_t experts, int64_t rank) {
  const Tensor b = b_OX.to(DType::f32);
  const int64_t out = b.size(0), x = b.size(1);
  Tensor b_OR = Tensor::empty({out, rank});
  const float* src = b.data<float>();
  float* dst = b_OR.data<float>();
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < rank; ++k) dst[o * rank + k] = src[o * x + k * experts + e];
  }
  return b_OR;
}

// Expert e's A_e^T [in, R], f32, out of PEFT's lora_A [R E, in] (its rows e R + k).
Tensor expert_a_t(const Tensor& a_XI, int64_t e, int64_t rank) {
  const Tensor a = a_XI.to(DType::f32);
  const int64_t in = a.size(1);
  Tensor a_IR = Tensor::empty({in, rank});
  const float* src = a.data<float>() + e * rank * in;
  float* dst = a_IR.data<float>();
  for (int64_t k = 0; k < rank; ++k) {
    for (int64_t i = 0; i < in; ++i) dst[i * rank + k] = src[k * in + i];
  }
  return a_IR;
}

// scale * B_e A_e [out, in]: the linear op's y = x w^T with x = B_e, w = A_e^T.
Tensor expert_delta(const Parameter& a, const Parameter& b, int64_t e, int64_t experts, int64_t rank, float scale) {
  const Tensor b_OR = expert_b(b.value, e, experts, rank), a_IR = expert_a_t(a.value, e, rank);
  Tensor d = Tensor::empty({b_OR.size(0), a_IR.size(0)});
  ops::linear_forward(b_OR, a_IR, Tensor(), d);
  ops::scale(d, scale);
  return d;
}

// Given dW_e [out, in] (the merged weight's gradient): lora_B.grad's columns k E + e += s dW_e A_e^T,
// lora_A.grad's rows e R + k += s (B_e^T dW_e), through the linear op's backward of y = B_e A_e.
void expert_grads(Tensor dw, Parameter& a, Parameter& b, int64_t e, int64_t experts, int64_t rank, float scale) {
  ops::scale(dw, scale);
  const Tensor b_OR = expert_b(b.value, e, experts, rank), a_IR = expert_a_t(a.value, e, rank);
  Tensor db_OR = Tensor::empty(b_OR.shape()), da_IR = Tensor::zeros(a_IR.shape()), no_bias;
  ops::linear_backward(dw, b_OR, a_IR, db_OR, da_IR, no_bias);
  const int64_t out = b_OR.size(0), in = a_IR.size(0), x = b.grad.size(1);
  float* gb = b.grad.data<float>();
  const float* db = db_OR.data<float>();
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t k = 0; k < rank; ++k) gb[o * x + k * experts + e] += db[o * rank + k];
  }
  float* ga = a.grad.data<float>() + e * rank * in;
  const float* da = da_IR.data<float>();
  for (int64_t k = 0; k < rank; ++k) {
    for (int64_t i = 0; i < in; ++i) ga[k * in + i] += da[i * rank + k];
  }
}

Tensor base_f32(const Parameter& p) { return p.quantized() ? p.to_f32() : p.data().to(DType::f32).clone(); }

}  // namespace

LoraExperts::LoraExperts(const LoraExpertsConfig& config, const std::string& fqn)
    : Experts(config, fqn), config_(config),
      scale_(static_cast<float>(config.alpha / static_cast<double>(config.rank))) {
  TITAN_CHECK(config.rank >= 1, "[lora] ", fqn, ": rank ", config.rank, " must be >= 1");
  const int64_t r = config.rank * config.num_experts, f = config.hidden_dim, d = config.dim;
  gate_up_A.init_trainable(fqn + ".gate_up_proj.lora_A.weight", {r, d}, parameter_device());
  gate_up_B.init_trainable(fqn + ".gate_up_proj.lora_B.weight", {2 * f, r}, parameter_device());
  down_A.init_trainable(fqn + ".down_proj.lora_A.weight", {r, f}, parameter_device());
  down_B.init_trainable(fqn + ".down_proj.lora_B.weight", {d, r}, parameter_device());
}

void LoraExperts::merged(Tensor& w1_EFD, Tensor& w3_EFD, Tensor& w2_EDF) const {
  const int64_t experts = config_.num_experts, f = config_.hidden_dim, rank = config_.rank;
  w1_EFD = base_f32(w1);
  w3_EFD = base_f32(w3);
  w2_EDF = base_f32(w2);
  if (gate_up_A.value.is_meta()) return;  // titan plan's meta run: shapes only
  for (int64_t e = 0; e < experts; ++e) {
    const Tensor gate_up = expert_delta(gate_up_A, gate_up_B, e, experts, rank, scale_);  // [2F, D]
    Tensor w1_e = w1_EFD.narrow(0, e, 1).reshape({f, -1}), w3_e = w3_EFD.narrow(0, e, 1).reshape({f, -1});
    ops::accumulate(w1_e, gate_up.narrow(0, 0, f));
    ops::accumulate(w3_e, gate_up.narrow(0, f, f));
    Tensor w2_e = w2_EDF.narrow(0, e, 1).reshape({-1, f});
    ops::accumulate(w2_e, expert_delta(down_A, down_B, e, experts, rank, scale_));
  }
}

Tensor LoraExperts::forward(const Tensor& x_PD, const Tensor& offsets_E1, std::any& saved) const {
  auto& s = saved.emplace<ops::MoeExpertsSaved>();
  Tensor w1m, w3m, w2m;
  merged(w1m, w3m, w2m);
  const DType dtype = w1.for_compute().dtype();
  Tensor y_PD = Tensor::empty(x_PD.shape(), DType::f32, x_PD.device());
  ops::moe_experts_forward(ops::cast_to(x_PD, dtype), offsets_E1, ops::cast_to(w1m, dtype), ops::cast_to(w3m, dtype),
                           ops::cast_to(w2m, dtype), y_PD, s);
  return y_PD;
}

void LoraExperts::backward(const Tensor& dy_PD, const Tensor& weight_NK, const Tensor& pair_of_row_P,
                           const Tensor& x_PD, const Tensor& offsets_E1, std::any& saved, Tensor& dx_PD,
                           Tensor& dweight_NK) {
  const auto& s = std::any_cast<const ops::MoeExpertsSaved&>(saved);
  Tensor w1m, w3m, w2m;
  merged(w1m, w3m, w2m);
  const DType dtype = w1.for_compute().dtype();
  Tensor dw1 = Tensor::zeros(w1m.shape()), dw3 = Tensor::zeros(w3m.shape()), dw2 = Tensor::zeros(w2m.shape());
  ops::moe_experts_backward(dy_PD, weight_NK, pair_of_row_P, ops::cast_to(x_PD, dtype), offsets_E1,
                            ops::cast_to(w1m, dtype), ops::cast_to(w3m, dtype), ops::cast_to(w2m, dtype), s, dx_PD,
                            dw1, dw3, dw2, dweight_NK);
  saved.reset();
  if (gate_up_A.value.is_meta()) return;  // titan plan's meta run: shapes only
  const int64_t experts = config_.num_experts, f = config_.hidden_dim, d = config_.dim, rank = config_.rank;
  for (int64_t e = 0; e < experts; ++e) {
    Tensor gate_up = Tensor::empty({2 * f, d});  // [dW1_e; dW3_e], the fused gate_up_proj's gradient
    gate_up.narrow(0, 0, f).copy_from(dw1.narrow(0, e, 1).reshape({f, d}));
    gate_up.narrow(0, f, f).copy_from(dw3.narrow(0, e, 1).reshape({f, d}));
    expert_grads(gate_up, gate_up_A, gate_up_B, e, experts, rank, scale_);
    expert_grads(dw2.narrow(0, e, 1).reshape({d, f}).clone(), down_A, down_B, e, experts, rank, scale_);
  }
}

void LoraExperts::collect(ParameterList& out) {
  Experts::collect(out);
  for (Parameter* p : {&gate_up_A, &gate_up_B, &down_A, &down_B}) out.push_back(p);
}

void LoraExperts::keep_experts(int64_t, int64_t) {
  TITAN_FAIL("[parallel] LoRA on experts (lora.target_parameters) is not expert-parallel yet. HINT: use "
             "parallelism.expert_parallel_degree = 1");
}

}  // namespace titan::nn
