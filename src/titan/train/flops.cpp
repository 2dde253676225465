#include "titan/train/flops.h"

namespace titan::train {

int64_t matmul_params(const nn::DecoderConfig& c) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t per_layer = c.dim * q + 2 * c.dim * kv + q * c.dim + 3 * c.dim * c.hidden_dim;
  return c.num_layers * per_layer + c.vocab_size * c.dim;
}

double train_flops_per_token(const nn::DecoderConfig& c, int64_t seq_len) {
  return 6.0 * static_cast<double>(matmul_params(c)) +
         12.0 * static_cast<double>(c.num_layers * c.num_heads * c.head_dim * seq_len);
}

}  // namespace titan::train
