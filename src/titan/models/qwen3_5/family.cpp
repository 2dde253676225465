#include "titan/models/qwen3_5/family.h"

#include "titan/config/registry.h"
#include "titan/models/decoder/family.h"
#include "titan/models/qwen3/configs.h"
#include "titan/models/qwen3/specs.h"

namespace titan::qwen3_5 {

// qwen3's debug sizes (vocabulary, width, depth, FFN) with Qwen3.5's blocks.
nn::DecoderConfig debug_config() {
  nn::DecoderConfig c = qwen3::find_spec("debug").config;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.rope_theta = 1e7f;
  c.layer_types = {"linear_attention", "linear_attention", "linear_attention", "full_attention"};
  c.linear_num_key_heads = 2;
  c.linear_key_head_dim = 64;
  c.linear_num_value_heads = 4;
  c.linear_value_head_dim = 64;
  c.linear_conv_kernel_dim = 4;
  c.partial_rotary_factor = 0.25f;
  c.attn_output_gate = true;
  c.zero_centered_norms = true;
  return c;
}

// The reduced Qwen3.5 MoE: every MLP 8 experts of width 256, top-2 renormalised, and a shared expert
// of width 256 with its sigmoid gate.
static nn::DecoderConfig debug_moe_config() {
  nn::DecoderConfig c = debug_config();
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_hidden_dim = 256;
  c.shared_expert_dim = 256;
  c.norm_topk_prob = true;
  c.decoder_sparse_step = 1;
  return c;
}

// The quickstart's run (qwen3_debug's data and schedule) on the reduced Qwen3.5.
static config::JobConfig qwen3_5_debug() {
  config::JobConfig c = qwen3::qwen3_debug();
  c.job.dump_folder = "./outputs/qwen3_5_debug";
  c.model.name = "debug_qwen3_5";
  return c;
}

static std::vector<config::ConfigEntry> config_functions() {
  return {{"qwen3_5_debug",
           "the reduced Qwen3.5 (3 gated DeltaNet + 1 full attention layers, dim 256) on the built-in dataset, 160 steps",
           &qwen3_5_debug}};
}

const models::ModelSpec& family() {
  static const models::ModelSpec spec = models::decoder_family(
      "qwen3_5", "Qwen3.5 dense and MoE (gated DeltaNet + gated attention), from published text or multimodal folders",
      {{"debug_qwen3_5", "reduced Qwen3.5: 4 layers (3 gated DeltaNet, 1 full attention), dim 256", debug_config()},
       {"debug_qwen3_5_moe", "reduced Qwen3.5 MoE: debug_qwen3_5 with 8 experts, top-2, and a shared expert",
        debug_moe_config()}},
      {"Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
       "Qwen3_5MoeForConditionalGeneration"},
      &config_functions);
  return spec;
}

}  // namespace titan::qwen3_5
