#include "titan/models/decoder/parallel_plan.h"

#include "titan/core/error.h"
#include "titan/nn/lora.h"

namespace titan::models {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

int tp_split_dim(const std::string& fqn) {
  // LoRA adapters split with their projection: a column-parallel weight's lora_B by its rows (A
  // whole on every rank), a row-parallel one's lora_A by its columns (B whole).
  if (nn::is_lora_parameter(fqn)) {
    const int base = tp_split_dim(nn::lora_base_weight(fqn));
    if (ends_with(fqn, ".lora_A.weight")) return base == 1 ? 1 : -1;
    return base == 0 ? 0 : -1;
  }
  for (const char* col : {"attention.wq.weight", "attention.wk.weight", "attention.wv.weight", "attention.wq.bias",
                          "attention.wk.bias", "attention.wv.bias", "feed_forward.w1.weight", "feed_forward.w3.weight",
                          "feed_forward.w1.bias", "feed_forward.w3.bias"}) {
    if (ends_with(fqn, col)) return 0;
  }
  for (const char* col : {"attention.in_proj_qkv.weight", "attention.conv1d.weight", "attention.in_proj_z.weight",
                          "attention.in_proj_b.weight", "attention.in_proj_a.weight", "attention.A_log",
                          "attention.dt_bias"}) {
    if (ends_with(fqn, col)) return 0;
  }
  if (fqn == "tok_embeddings.weight" || fqn == "output.weight") return 0;
  if (ends_with(fqn, "attention.wo.weight") || ends_with(fqn, "attention.out_proj.weight") ||
      ends_with(fqn, "feed_forward.w2.weight")) {
    return 1;
  }
  if (ends_with(fqn, "norm.weight")) return -1;
  TITAN_FAIL("[parallel] ", fqn, " has no tensor-parallel placement (mixture-of-experts layers and row-parallel "
             "biases are not tensor-parallel yet). HINT: use parallelism.tensor_parallel_degree = 1 for this model");
}

std::vector<int64_t> tp_sections(const nn::DecoderConfig& full, const std::string& fqn) {
  if (nn::is_lora_parameter(fqn)) {  // lora_B of a fused projection: the projection's row sections
    return ends_with(fqn, ".lora_B.weight") ? tp_sections(full, nn::lora_base_weight(fqn)) : std::vector<int64_t>{};
  }
  if (!ends_with(fqn, "attention.in_proj_qkv.weight") && !ends_with(fqn, "attention.conv1d.weight")) return {};
  const int64_t key = full.linear_num_key_heads * full.linear_key_head_dim;
  return {key, key, full.linear_num_value_heads * full.linear_value_head_dim};
}

bool tp_grad_is_partial(const std::string& fqn, bool sequence_parallel) {
  // The whole adapter half of a split projection sees a partial product on each rank: a
  // column-parallel projection's lora_A (its du is this rank's rows' share), a row-parallel one's
  // lora_B (its u is this rank's columns' share); their gradients sum over the ranks.
  if (nn::is_lora_parameter(fqn)) return tp_split_dim(fqn) < 0;
  if (tp_split_dim(fqn) >= 0) return false;
  return sequence_parallel || ends_with(fqn, "q_norm.weight") || ends_with(fqn, "k_norm.weight") ||
         ends_with(fqn, "attention.norm.weight");
}

nn::DecoderConfig tp_local_config(const nn::DecoderConfig& full, int64_t tp) {
  nn::DecoderConfig c = full;
  if (tp == 1) return c;
  TITAN_CHECK(full.num_experts == 0, "[parallel] tensor_parallel_degree=", tp,
              ": mixture-of-experts layers are not tensor-parallel yet. HINT: shard with data_parallel_shard_degree");
  TITAN_CHECK(!full.attention_bias && !full.mlp_bias, "[parallel] tensor_parallel_degree=", tp,
              ": row-parallel biases (attention_bias / mlp_bias) are not tensor-parallel yet");
  for (const auto& [name, value] : {std::pair<const char*, int64_t>{"num_heads", full.num_heads},
                                    {"num_kv_heads", full.num_kv_heads},
                                    {"linear_num_key_heads", full.linear_num_key_heads},
                                    {"linear_num_value_heads", full.linear_num_value_heads},
                                    {"hidden_dim (FFN)", full.hidden_dim},
                                    {"vocab_size", full.vocab_size}}) {
    TITAN_CHECK(value % tp == 0, "[parallel] the model's ", name, " = ", value,
                " does not divide by parallelism.tensor_parallel_degree = ", tp,
                ". HINT: pick a tensor_parallel_degree that divides heads, kv heads, FFN width and vocabulary");
  }
  c.num_heads /= tp;
  c.num_kv_heads /= tp;
  c.linear_num_key_heads /= tp;
  c.linear_num_value_heads /= tp;
  c.hidden_dim /= tp;
  c.vocab_size /= tp;
  return c;
}

}  // namespace titan::models
