#include "titan/models/decoder/hf_names.h"

#include <cctype>
#include <utility>

#include "titan/core/error.h"

namespace titan::models {

// {ours, HF} for names outside the layers, then the per-layer suffixes.
static const std::pair<const char*, const char*> kTopLevel[] = {
    {"tok_embeddings.weight", "model.embed_tokens.weight"},
    {"norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
};
static const std::pair<const char*, const char*> kPerLayer[] = {
    {"attention_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attention.wq.weight", "self_attn.q_proj.weight"},
    {"attention.wq.bias", "self_attn.q_proj.bias"},
    {"attention.wk.weight", "self_attn.k_proj.weight"},
    {"attention.wk.bias", "self_attn.k_proj.bias"},
    {"attention.wv.weight", "self_attn.v_proj.weight"},
    {"attention.wv.bias", "self_attn.v_proj.bias"},
    {"attention.wo.weight", "self_attn.o_proj.weight"},
    {"attention.wo.bias", "self_attn.o_proj.bias"},
    {"attention.q_norm.weight", "self_attn.q_norm.weight"},
    {"attention.k_norm.weight", "self_attn.k_norm.weight"},
    {"feed_forward.w1.weight", "mlp.gate_proj.weight"},
    {"feed_forward.w1.bias", "mlp.gate_proj.bias"},
    {"feed_forward.w2.weight", "mlp.down_proj.weight"},
    {"feed_forward.w2.bias", "mlp.down_proj.bias"},
    {"feed_forward.w3.weight", "mlp.up_proj.weight"},
    {"feed_forward.w3.bias", "mlp.up_proj.bias"},
    {"moe.router.gate.weight", "mlp.gate.weight"},
    // Qwen3.5 MoE's shared expert and its gate.
    {"moe.shared_expert.w1.weight", "mlp.shared_expert.gate_proj.weight"},
    {"moe.shared_expert.w2.weight", "mlp.shared_expert.down_proj.weight"},
    {"moe.shared_expert.w3.weight", "mlp.shared_expert.up_proj.weight"},
    {"moe.shared_expert_gate.weight", "mlp.shared_expert_gate.weight"},
    // Qwen3.5's gated DeltaNet layers (nn/gated_delta_net.h) in the attention slot.
    {"attention.in_proj_qkv.weight", "linear_attn.in_proj_qkv.weight"},
    {"attention.in_proj_z.weight", "linear_attn.in_proj_z.weight"},
    {"attention.in_proj_b.weight", "linear_attn.in_proj_b.weight"},
    {"attention.in_proj_a.weight", "linear_attn.in_proj_a.weight"},
    {"attention.out_proj.weight", "linear_attn.out_proj.weight"},
    {"attention.conv1d.weight", "linear_attn.conv1d.weight"},  // ours [C, K], HF's [C, 1, K]
    {"attention.A_log", "linear_attn.A_log"},
    {"attention.dt_bias", "linear_attn.dt_bias"},
    {"attention.norm.weight", "linear_attn.norm.weight"},
};
// Stacked expert weights [E, ...]: expert e is HF's mlp.experts.<e>.<name> (slice e of dim 0).
static const std::pair<const char*, const char*> kPerExpert[] = {
    {"moe.experts.w1", "gate_proj.weight"},
    {"moe.experts.w2", "down_proj.weight"},
    {"moe.experts.w3", "up_proj.weight"},
};

// Splits "<prefix><digits>.<rest>" into {digits, rest}; false when `name` has another shape.
static bool split_layer(const std::string& name, const std::string& prefix, std::string& index,
                        std::string& rest) {
  if (name.rfind(prefix, 0) != 0) return false;
  size_t i = prefix.size();
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == prefix.size() || i >= name.size() || name[i] != '.') return false;
  index = name.substr(prefix.size(), i - prefix.size());
  rest = name.substr(i + 1);
  return true;
}

std::string to_hf_name(const std::string& fqn) {
  for (const auto& [ours, hf] : kTopLevel) {
    if (fqn == ours) return hf;
  }
  std::string index, rest;
  if (split_layer(fqn, "layers.", index, rest)) {
    for (const auto& [ours, hf] : kPerLayer) {
      if (rest == ours) return "model.layers." + index + "." + hf;
    }
  }
  TITAN_FAIL("[qwen3] no single Hugging Face name for parameter '", fqn, "'");
}

std::vector<std::pair<std::string, Tensor>> to_hf_tensors(const std::string& fqn, const Tensor& t) {
  std::string index, rest;
  if (split_layer(fqn, "layers.", index, rest)) {
    for (const auto& [ours, hf] : kPerExpert) {
      if (rest != ours) continue;
      std::vector<std::pair<std::string, Tensor>> out;
      for (int64_t e = 0; e < t.size(0); ++e) {
        out.emplace_back("model.layers." + index + ".mlp.experts." + std::to_string(e) + "." + hf, t.select(e));
      }
      return out;
    }
  }
  if (fqn.ends_with(".attention.conv1d.weight")) return {{to_hf_name(fqn), t.reshape({t.size(0), 1, t.size(1)})}};
  return {{to_hf_name(fqn), t}};
}

std::optional<std::string> from_hf_name(const std::string& hf_name) {
  for (const auto& [ours, hf] : kTopLevel) {
    if (hf_name == hf) return std::string(ours);
  }
  std::string index, rest;
  if (split_layer(hf_name, "model.layers.", index, rest)) {
    for (const auto& [ours, hf] : kPerLayer) {
      if (rest == hf) return "layers." + index + "." + ours;
    }
    std::string expert, name;
    if (split_layer(rest, "mlp.experts.", expert, name)) {
      for (const auto& [ours, hf] : kPerExpert) {
        if (name == hf) return "layers." + index + "." + ours;
      }
    }
  }
  return std::nullopt;
}

}  // namespace titan::models
