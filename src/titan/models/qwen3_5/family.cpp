#include "titan/models/qwen3_5/family.h"

#include "titan/config/registry.h"
#include "titan/models/decoder/family.h"
#include "titan/models/qwen3/configs.h"
#include "titan/models/qwen3/specs.h"

namespace titan::qwen3_5 {

// Qwen3.5's blocks on a Qwen3-shaped config: every 4th layer an output-gated full attention rotating
// a quarter of each head (theta 1e7), gated DeltaNet layers between (conv kernel 4), zero-centred
// norms.
static nn::DecoderConfig with_qwen3_5_blocks(nn::DecoderConfig c, int64_t key_heads, int64_t value_heads,
                                             int64_t linear_head_dim) {
  c.rope_theta = 1e7f;
  c.layer_types.clear();
  for (int64_t i = 0; i < c.num_layers; ++i) {
    c.layer_types.push_back((i + 1) % 4 == 0 ? "full_attention" : "linear_attention");
  }
  c.linear_num_key_heads = key_heads;
  c.linear_key_head_dim = linear_head_dim;
  c.linear_num_value_heads = value_heads;
  c.linear_value_head_dim = linear_head_dim;
  c.linear_conv_kernel_dim = 4;
  c.partial_rotary_factor = 0.25f;
  c.attn_output_gate = true;
  c.zero_centered_norms = true;
  return c;
}

// Every MLP a mixture of `experts` of width `width`, top-k renormalised, and a shared expert of
// the same width with its sigmoid gate (Qwen3.5 MoE).
static nn::DecoderConfig with_moe(nn::DecoderConfig c, int64_t experts, int64_t top_k, int64_t width) {
  c.num_experts = experts;
  c.num_experts_per_tok = top_k;
  c.moe_hidden_dim = width;
  c.shared_expert_dim = width;
  c.norm_topk_prob = true;
  c.decoder_sparse_step = 1;
  return c;
}

// qwen3's debug sizes (vocabulary, width, depth, FFN) with Qwen3.5's blocks.
nn::DecoderConfig debug_config() {
  nn::DecoderConfig c = qwen3::find_spec("debug").config;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  return with_qwen3_5_blocks(c, 2, 4, 64);
}

// The published Qwen3.5 language models (the text_config of Qwen/Qwen3.5-*'s config.json): Qwen3's
// published basics (RMSNorm eps 1e-6, q/k norm, no attention bias) with vocabulary 248,320,
// head_dim 256, 262,144 positions, and DeltaNet heads 128 wide.
static nn::DecoderConfig published(int64_t dim, int64_t layers, int64_t heads, int64_t kv_heads, int64_t hidden,
                                   int64_t linear_key_heads, int64_t linear_value_heads, bool tied) {
  nn::DecoderConfig c = qwen3::find_spec("0.6B").config;
  c.vocab_size = 248320;
  c.dim = dim;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = 256;
  c.hidden_dim = hidden;
  c.tie_embeddings = tied;
  c.max_seq_len = 262144;
  return with_qwen3_5_blocks(c, linear_key_heads, linear_value_heads, 128);
}

// The reduced Qwen3.5 MoE: debug_qwen3_5 with 8 experts of width 256, top-2.
static nn::DecoderConfig debug_moe_config() { return with_moe(debug_config(), 8, 2, 256); }

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
       {"qwen3_5_0.8B", "Qwen3.5-0.8B: 24 layers (18 DeltaNet 16/16 heads, 6 attention 8 / 2 kv), dim 1024, FFN 3584, tied",
        published(1024, 24, 8, 2, 3584, 16, 16, true)},
       {"qwen3_5_27B", "Qwen3.5-27B: 64 layers (48 DeltaNet 16/48 heads, 16 attention 24 / 4 kv), dim 5120, FFN 17408",
        published(5120, 64, 24, 4, 17408, 16, 48, false)},
       {"qwen3_5_35B-A3B", "Qwen3.5-35B-A3B: 40 layers (30 DeltaNet 16/32 heads, 10 attention 16 / 2 kv), dim 2048, "
        "256 experts top-8 + a shared expert, expert FFN 512",
        with_moe(published(2048, 40, 16, 2, 512, 16, 32, false), 256, 8, 512)},
       {"debug_qwen3_5_moe", "reduced Qwen3.5 MoE: debug_qwen3_5 with 8 experts, top-2, and a shared expert",
        debug_moe_config()}},
      {"Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForCausalLM",
       "Qwen3_5MoeForConditionalGeneration"},
      &config_functions);
  return spec;
}

}  // namespace titan::qwen3_5
