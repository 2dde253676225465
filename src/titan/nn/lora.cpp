#include "titan/nn/lora.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "titan/core/log.h"
#include "titan/core/rng.h"
#include "titan/nn/decoder.h"
#include "titan/nn/feed_forward.h"
#include "titan/nn/gated_delta_net.h"
#include "titan/nn/moe.h"
#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/matmul/linear.h"
#include "titan/ops/rows/rows.h"

namespace titan::nn {

namespace {
std::optional<LoraDropoutKey>& dropout_key() {
  static std::optional<LoraDropoutKey> key;
  return key;
}
}  // namespace

void set_lora_dropout_key(const std::optional<LoraDropoutKey>& key) { dropout_key() = key; }
const std::optional<LoraDropoutKey>& lora_dropout_key() { return dropout_key(); }

LoraLinear::LoraLinear(const LoraLinearConfig& config, const std::string& fqn)
    : Linear(config, fqn), rank_(config.rank), scale_(static_cast<float>(config.alpha / static_cast<double>(config.rank))),
      dropout_(config.dropout) {
  TITAN_CHECK(config.rank >= 1, "[lora] ", fqn, ": rank ", config.rank, " must be >= 1");
  TITAN_CHECK(config.dropout >= 0.0 && config.dropout < 1.0, "[lora] ", fqn, ": dropout ", config.dropout,
              " must be in [0, 1)");
  lora_A.init_trainable(fqn + ".lora_A.weight", {config.rank, config.in_features}, parameter_device());
  lora_B.init_trainable(fqn + ".lora_B.weight", {config.out_features, config.rank}, parameter_device());
}

Tensor LoraLinear::down(const Tensor& x_NI) const {
  const Tensor a_RI = lora_A.for_compute();
  Tensor u_NR = Tensor::empty({x_NI.numel() / config().in_features, rank_}, DType::f32, x_NI.device());
  ops::linear_forward(ops::cast_to(x_NI, a_RI.dtype()), a_RI, Tensor(), u_NR);
  ops::scale(u_NR, scale_);
  return u_NR;
}

std::optional<ops::DropoutArgs> LoraLinear::dropout_args() const {
  const std::optional<LoraDropoutKey>& key = lora_dropout_key();
  if (dropout_ == 0.0 || !key) return std::nullopt;
  // One stream per (module, step, micro-batch, rank): boost's hash_combine over the FQN's FNV-1a
  // hash (a fixed function, so tools/make_lora_dropout_fixture.py draws the same masks).
  uint64_t stream = 0xcbf29ce484222325ull;
  for (const char c : weight.fqn) stream = (stream ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  for (const int64_t v : {key->step, key->micro, key->rank}) {
    stream ^= static_cast<uint64_t>(v) + 0x9e3779b97f4a7c15ull + (stream << 6) + (stream >> 2);
  }
  return ops::DropoutArgs{dropout_, key->seed, stream};
}

Tensor LoraLinear::adapter_input(const Tensor& x_NI, const std::optional<ops::DropoutArgs>& drop) const {
  if (!drop) return x_NI;
  const Tensor x32 = x_NI.dtype() == DType::f32 ? x_NI.contiguous() : x_NI.to(DType::f32);
  Tensor d_NI = Tensor::empty(x32.shape(), DType::f32, x32.device());
  ops::dropout_forward(x32, *drop, d_NI);
  return d_NI;
}

Tensor LoraLinear::forward(const Tensor& x_NI, Saved& saved) const {
  Tensor y_NO = Linear::forward(x_NI, saved);
  const Tensor b_OR = lora_B.for_compute();
  Tensor v_NO = Tensor::empty(y_NO.shape(), DType::f32, y_NO.device());
  ops::linear_forward(ops::cast_to(down(adapter_input(saved.x_NI, dropout_args())), b_OR.dtype()), b_OR, Tensor(),
                      v_NO);
  ops::accumulate(y_NO, v_NO);
  return y_NO;
}

Tensor LoraLinear::backward(const Tensor& dy_NO, Saved& saved, bool need_dx) {
  const std::optional<ops::DropoutArgs> drop = dropout_args();
  // The adapter's input in the dtype the base saw (d(x) rounded like x on the bf16 path).
  const Tensor x_NI = ops::cast_to(adapter_input(saved.x_NI.reshape({-1, config().in_features}), drop),
                                   saved.x_NI.dtype());
  const Tensor a_RI = lora_A.for_compute(), b_OR = lora_B.for_compute();
  const Tensor u_NR = ops::cast_to(down(x_NI), b_OR.dtype());
  Tensor du_NR = Tensor::empty({x_NI.size(0), rank_}, DType::f32, x_NI.device()), no_bias;
  ops::linear_backward(dy_NO, u_NR, b_OR, du_NR, lora_B.grad, no_bias);  // dB += dy^T u, du = dy B
  ops::scale(du_NR, scale_);
  Tensor dx_lora_NI = need_dx ? Tensor::empty(x_NI.shape(), DType::f32, x_NI.device()) : Tensor();
  ops::linear_backward(du_NR, x_NI, a_RI, dx_lora_NI, lora_A.grad, no_bias);  // dA += du^T x, dx = du A
  if (need_dx && drop) {
    Tensor masked_NI = Tensor::empty(dx_lora_NI.shape(), DType::f32, dx_lora_NI.device());
    ops::dropout_backward(dx_lora_NI, *drop, masked_NI);
    dx_lora_NI = masked_NI;
  }
  Tensor dx_NI = Linear::backward(dy_NO, saved, need_dx);
  if (need_dx) add_inplace(dx_NI, dx_lora_NI.reshape(dx_NI.shape()));
  return dx_NI;
}

void LoraLinear::collect(ParameterList& out) {
  Linear::collect(out);
  out.push_back(&lora_A);
  out.push_back(&lora_B);
}

bool is_lora_parameter(const std::string& fqn) {
  return fqn.ends_with(".lora_A.weight") || fqn.ends_with(".lora_B.weight");
}

std::string lora_base_weight(const std::string& fqn) {
  TITAN_CHECK(is_lora_parameter(fqn), "[lora] ", fqn, " is not an adapter parameter");
  return fqn.substr(0, fqn.size() - std::string(".lora_A.weight").size()) + ".weight";
}

void init_lora_parameter(Parameter& p, uint64_t seed) {
  TITAN_CHECK(is_lora_parameter(p.fqn), "[lora] ", p.fqn, " is not an adapter parameter");
  Tensor& value = p.value;
  value.zero_();
  if (!p.fqn.ends_with(".lora_A.weight")) return;  // B starts at zero
  const float bound = 1.0f / std::sqrt(static_cast<float>(value.size(1)));
  Rng(seed, std::hash<std::string>{}(p.fqn)).fill_uniform(value.data<float>(), value.numel(), bound);
}

std::map<std::string, LoraLinear*> lora_linears(Decoder& model) {
  std::map<std::string, LoraLinear*> out;
  const auto add = [&](const std::unique_ptr<LinearModule>& m) {
    if (auto* lora = dynamic_cast<LoraLinear*>(m.get())) out[lora->weight.fqn] = lora;
  };
  const auto add_ffn = [&](FeedForwardModule* m) {
    if (auto* ffn = dynamic_cast<FeedForward*>(m)) {
      for (const auto* w : {&ffn->w1, &ffn->w2, &ffn->w3}) add(*w);
    }
  };
  for (auto& layer : model.layers) {
    if (auto* attention = dynamic_cast<Attention*>(layer->attention.get())) {
      for (const auto* m : {&attention->wq, &attention->wk, &attention->wv, &attention->wo}) add(*m);
    }
    if (auto* delta = dynamic_cast<GatedDeltaNet*>(layer->attention.get())) {
      for (const auto* m : {&delta->in_proj_qkv, &delta->in_proj_z, &delta->in_proj_b, &delta->in_proj_a,
                            &delta->out_proj}) {
        add(*m);
      }
    }
    add_ffn(layer->feed_forward.get());
    if (auto* moe = dynamic_cast<Moe*>(layer->moe.get()); moe != nullptr && moe->shared_expert) {
      add_ffn(moe->shared_expert.get());
      add(moe->shared_expert_gate);
    }
  }
  return out;
}

std::map<std::string, LoraExperts*> lora_experts(Decoder& model) {
  std::map<std::string, LoraExperts*> out;
  for (auto& layer : model.layers) {
    if (auto* moe = dynamic_cast<Moe*>(layer->moe.get()); moe != nullptr) {
      auto* experts = dynamic_cast<LoraExperts*>(moe->experts.get());
      if (experts != nullptr) out[experts->w1.fqn.substr(0, experts->w1.fqn.size() - 3)] = experts;  // less ".w1"
    }
  }
  return out;
}

MergedWeights::MergedWeights(Decoder& model) : lora_(lora_linears(model)) {
  for (const auto& [fqn, experts] : lora_experts(model)) {
    for (const Parameter* w : {&experts->w1, &experts->w2, &experts->w3}) experts_[w->fqn] = experts;
  }
  for (Parameter* p : model.parameters()) {
    if (!is_lora_parameter(p->fqn)) params_.push_back(p);
  }
  if (std::ranges::any_of(params_, [](const Parameter* p) { return p->quantized() && p->quant_kind != ops::QuantKind::gguf; })) {
    log_warn("[export] the base is quantized (lora.base_quantization): the merged weights are its decoded values "
             "plus the adapters, lossy by the quantization error. HINT: lora.save_adapter writes the adapters alone, "
             "for the original base");
  }
}

Tensor MergedWeights::get(const Parameter& p) {
  if (const auto e = experts_.find(p.fqn); e != experts_.end()) {
    if (!pending_.count(p.fqn)) {
      Tensor w1, w3, w2;
      e->second->merged(w1, w3, w2);
      pending_[e->second->w1.fqn] = w1;
      pending_[e->second->w3.fqn] = w3;
      pending_[e->second->w2.fqn] = w2;
    }
    const Tensor out = pending_.at(p.fqn);
    pending_.erase(p.fqn);
    return out;
  }
  // A quantized base is decoded (f32) first: the merged weight is lossy by the quantization error.
  const Tensor base = p.quantized() ? p.to_f32() : p.data();
  const auto it = lora_.find(p.fqn);
  if (it == lora_.end()) return base;
  const LoraLinear& l = *it->second;
  return lora_merged(base, l.lora_A.value, l.lora_B.value, l.scale());
}

void for_each_merged_weight(Decoder& model, const std::function<void(const std::string& fqn, const Tensor& w)>& fn) {
  MergedWeights merged(model);
  for (const Parameter* p : merged.parameters()) fn(p->fqn, merged.get(*p));
}

Tensor lora_merged(const Tensor& w_OI, const Tensor& a_RI, const Tensor& b_OR, float scale) {
  // b a as the linear op's forward: y_OI = b_OR (a^T)_IR^T.
  const Tensor a32 = a_RI.to(DType::f32), b32 = b_OR.to(DType::f32);
  const int64_t r = a32.size(0), in = a32.size(1);
  // a's transpose: its elements as one-element rows of an [r, in] grid.
  Tensor a_IR = Tensor::empty({in, r});
  Tensor a_elements = a_IR.reshape({in * r, 1});
  ops::rows_transpose(a32.reshape({r * in, 1}), r, in, a_elements);
  Tensor ba_OI = Tensor::empty({b32.size(0), in});
  ops::linear_forward(b32, a_IR, Tensor(), ba_OI);
  ops::scale(ba_OI, scale);
  Tensor merged = w_OI.to(DType::f32).clone();
  ops::accumulate(merged, ba_OI);
  return merged;
}

}  // namespace titan::nn
