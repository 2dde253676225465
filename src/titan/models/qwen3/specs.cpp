#include "titan/models/qwen3/specs.h"

namespace titan::qwen3 {

// Common to every published Qwen3 dense model: head_dim 128, vocab 151,936, rope theta 1e6,
// RMSNorm eps 1e-6, q/k norm, no attention bias, 40,960 positions.
static nn::DecoderConfig published(int64_t dim, int64_t layers, int64_t heads, int64_t kv_heads,
                                   int64_t hidden, bool tied) {
  nn::DecoderConfig c;
  c.vocab_size = 151936;
  c.dim = dim;
  c.num_layers = layers;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.head_dim = 128;
  c.hidden_dim = hidden;
  c.norm_eps = 1e-6f;
  c.rope_theta = 1e6f;
  c.tie_embeddings = tied;
  c.attention_bias = false;
  c.qk_norm = true;
  c.max_seq_len = 40960;
  return c;
}

// Qwen3 MoE (Qwen/Qwen3-30B-A3B, Qwen/Qwen3-235B-A22B config.json): every layer sparse, 128
// experts, top-8, renormalised top-k weights; the dense intermediate_size is unused but kept.
static nn::DecoderConfig published_moe(int64_t dim, int64_t layers, int64_t heads, int64_t hidden,
                                       int64_t moe_hidden) {
  nn::DecoderConfig c = published(dim, layers, heads, 4, hidden, false);
  c.num_experts = 128;
  c.num_experts_per_tok = 8;
  c.moe_hidden_dim = moe_hidden;
  c.norm_topk_prob = true;
  c.decoder_sparse_step = 1;
  c.router_aux_loss_coef = 0.001f;
  return c;
}

static nn::DecoderConfig debug_config() {
  nn::DecoderConfig c;
  c.vocab_size = 2048;
  c.dim = 256;
  c.num_layers = 4;
  c.num_heads = 8;
  c.num_kv_heads = 4;
  c.head_dim = 32;
  c.hidden_dim = 768;
  c.norm_eps = 1e-6f;
  c.rope_theta = 1e6f;
  c.tie_embeddings = false;
  c.max_seq_len = 2048;
  return c;
}

static nn::DecoderConfig debug_moe_config() {
  nn::DecoderConfig c = debug_config();
  c.num_experts = 8;
  c.num_experts_per_tok = 2;
  c.moe_hidden_dim = 256;
  return c;
}

const std::vector<Spec>& specs() {
  static const std::vector<Spec> all = {
      {"debug", "4 layers, dim 256, 8 heads / 4 kv, vocab 2048 (tests, quickstart)", debug_config()},
      {"0.6B", "Qwen3-0.6B: 28 layers, dim 1024, 16 heads / 8 kv, FFN 3072, tied", published(1024, 28, 16, 8, 3072, true)},
      {"1.7B", "Qwen3-1.7B: 28 layers, dim 2048, 16 heads / 8 kv, FFN 6144, tied", published(2048, 28, 16, 8, 6144, true)},
      {"4B", "Qwen3-4B: 36 layers, dim 2560, 32 heads / 8 kv, FFN 9728, tied", published(2560, 36, 32, 8, 9728, true)},
      {"8B", "Qwen3-8B: 36 layers, dim 4096, 32 heads / 8 kv, FFN 12288", published(4096, 36, 32, 8, 12288, false)},
      {"14B", "Qwen3-14B: 40 layers, dim 5120, 40 heads / 8 kv, FFN 17408", published(5120, 40, 40, 8, 17408, false)},
      {"32B", "Qwen3-32B: 64 layers, dim 5120, 64 heads / 8 kv, FFN 25600", published(5120, 64, 64, 8, 25600, false)},
      {"30B-A3B", "Qwen3-30B-A3B: 48 layers, dim 2048, 32 heads / 4 kv, 128 experts top-8, expert FFN 768",
       published_moe(2048, 48, 32, 6144, 768)},
      {"235B-A22B", "Qwen3-235B-A22B: 94 layers, dim 4096, 64 heads / 4 kv, 128 experts top-8, expert FFN 1536",
       published_moe(4096, 94, 64, 12288, 1536)},
      {"debug_moe", "debug with 8 experts top-2 (expert FFN 256) in every layer (tests)", debug_moe_config()},
  };
  return all;
}

const Spec& find_spec(const std::string& name) {
  std::string known;
  for (const Spec& s : specs()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  TITAN_FAIL("[model] unknown Qwen3 spec '", name, "'. HINT: use one of ", known);
}

}  // namespace titan::qwen3
