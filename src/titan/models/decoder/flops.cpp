#include "titan/models/decoder/flops.h"

namespace titan::models {

int64_t matmul_params(const nn::DecoderConfig& c) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t attention = c.dim * q + 2 * c.dim * kv + q * c.dim;
  const int64_t dense_mlp = 3 * c.dim * c.hidden_dim;
  const int64_t active_moe = c.num_experts * c.dim + c.num_experts_per_tok * 3 * c.dim * c.moe_hidden_dim;
  const int64_t moe_layers = c.num_moe_layers();
  return c.num_layers * attention + (c.num_layers - moe_layers) * dense_mlp + moe_layers * active_moe +
         c.vocab_size * c.dim;
}

double train_flops_per_token(const nn::DecoderConfig& c, int64_t seq_len) {
  return 6.0 * static_cast<double>(matmul_params(c)) +
         12.0 * static_cast<double>(c.num_layers * c.num_heads * c.head_dim * seq_len);
}

}  // namespace titan::models
