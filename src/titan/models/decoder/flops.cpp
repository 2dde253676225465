#include "titan/models/decoder/flops.h"

namespace titan::models {

int64_t matmul_params(const nn::DecoderConfig& c) {
  const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  const int64_t attention = c.dim * q * (c.attn_output_gate ? 2 : 1) + 2 * c.dim * kv + q * c.dim;
  const int64_t v = c.linear_num_value_heads * c.linear_value_head_dim;
  const int64_t conv = 2 * c.linear_num_key_heads * c.linear_key_head_dim + v;
  const int64_t linear_attention = c.dim * conv + c.dim * v + 2 * c.dim * c.linear_num_value_heads + v * c.dim;
  const int64_t dense_mlp = 3 * c.dim * c.hidden_dim;
  const int64_t shared_expert = c.shared_expert_dim > 0 ? 3 * c.dim * c.shared_expert_dim + c.dim : 0;  // + its gate
  const int64_t active_moe =
      c.num_experts * c.dim + c.num_experts_per_tok * 3 * c.dim * c.moe_hidden_dim + shared_expert;
  const int64_t moe_layers = c.num_moe_layers(), linear = c.num_linear_attention_layers();
  return (c.num_layers - linear) * attention + linear * linear_attention + (c.num_layers - moe_layers) * dense_mlp +
         moe_layers * active_moe + c.vocab_size * c.dim;
}

double delta_rule_flops_per_token(const nn::DecoderConfig& c) {
  return 24.0 * static_cast<double>(c.num_linear_attention_layers() * c.linear_num_value_heads) *
         static_cast<double>(c.linear_key_head_dim * c.linear_value_head_dim);
}

double train_flops_per_token(const nn::DecoderConfig& c, int64_t seq_len) {
  const int64_t linear = c.num_linear_attention_layers();
  return 6.0 * static_cast<double>(matmul_params(c)) +
         12.0 * static_cast<double>((c.num_layers - linear) * c.num_heads * c.head_dim * seq_len) +
         delta_rule_flops_per_token(c);
}

}  // namespace titan::models
