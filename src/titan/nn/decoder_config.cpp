// DecoderConfig::validate, apart from decoder.cpp so that config parsing (models/decoder/hf_config.cpp) can
// be built without the layers and kernels: the config.json fuzz target (tests/fuzz) compiles just
// these two files (clang cannot build the AVX-512 kernels in titan_ops).
#include <algorithm>
#include <cmath>

#include "titan/core/error.h"
#include "titan/nn/decoder.h"

namespace titan::nn {

void DecoderConfig::validate() const {
  auto positive = [](const char* name, int64_t v) {
    TITAN_CHECK(v > 0, "[model] ", name, " must be > 0, got ", v);
  };
  positive("vocab_size", vocab_size);
  positive("dim", dim);
  positive("num_layers", num_layers);
  positive("num_heads", num_heads);
  positive("num_kv_heads", num_kv_heads);
  positive("head_dim", head_dim);
  positive("hidden_dim", hidden_dim);
  TITAN_CHECK(num_heads % num_kv_heads == 0, "[model] num_heads (", num_heads,
              ") must be a multiple of num_kv_heads (", num_kv_heads, ")");
  TITAN_CHECK(head_dim % 2 == 0, "[model] head_dim must be even for RoPE, got ", head_dim);
  TITAN_CHECK(rope_theta > 0, "[model] rope_theta must be > 0, got ", rope_theta);
  TITAN_CHECK(partial_rotary_factor > 0.0f && partial_rotary_factor <= 1.0f && rotary_dim() % 2 == 0 &&
                  rotary_dim() > 0,
              "[model] partial_rotary_factor ", partial_rotary_factor, " of head_dim ", head_dim,
              " must give an even number of rotated lanes in (0, head_dim]");
  ops::check_rope_scaling(rope_scaling, rotary_dim());
  if (!layer_types.empty()) {
    TITAN_CHECK(static_cast<int64_t>(layer_types.size()) == num_layers, "[model] layer_types lists ",
                layer_types.size(), " layers but the model has ", num_layers,
                ". HINT: one entry per layer (num_hidden_layers)");
    for (size_t i = 0; i < layer_types.size(); ++i) {
      TITAN_CHECK(layer_types[i] == "full_attention" || layer_types[i] == "linear_attention", "[model] layer_types[",
                  i, "] is '", layer_types[i], "', which titan does not know. HINT: full_attention or linear_attention");
    }
  }
  if (num_linear_attention_layers() > 0) {
    positive("linear_num_key_heads", linear_num_key_heads);
    positive("linear_key_head_dim", linear_key_head_dim);
    positive("linear_num_value_heads", linear_num_value_heads);
    positive("linear_value_head_dim", linear_value_head_dim);
    positive("linear_conv_kernel_dim", linear_conv_kernel_dim);
    TITAN_CHECK(linear_num_value_heads % linear_num_key_heads == 0, "[model] linear_num_value_heads (",
                linear_num_value_heads, ") must be a multiple of linear_num_key_heads (", linear_num_key_heads, ")");
  }
  TITAN_CHECK(num_experts >= 0, "[model] num_experts must be >= 0 (0 = dense), got ", num_experts);
  if (num_experts == 0) return;
  TITAN_CHECK(num_experts_per_tok >= 1 && num_experts_per_tok <= num_experts, "[model] num_experts_per_tok (top_k) = ",
              num_experts_per_tok, " must be in [1, num_experts = ", num_experts,
              "]. HINT: route each token to at most num_experts experts");
  positive("moe_hidden_dim (moe_intermediate_size)", moe_hidden_dim);
  positive("decoder_sparse_step", decoder_sparse_step);
  for (int64_t layer : mlp_only_layers) {
    TITAN_CHECK(layer >= 0 && layer < num_layers, "[model] mlp_only_layers names layer ", layer,
                ", outside [0, num_layers = ", num_layers, "). HINT: list layer indices of this model");
  }
  TITAN_CHECK(num_moe_layers() > 0, "[model] num_experts = ", num_experts, " but no layer is sparse (decoder_sparse_step ",
              decoder_sparse_step, ", mlp_only_layers, ", num_layers,
              " layers). HINT: set num_experts = 0 for a dense model, or lower decoder_sparse_step");
  TITAN_CHECK(std::isfinite(router_aux_loss_coef) && router_aux_loss_coef >= 0,
              "[model] router_aux_loss_coef must be >= 0, got ", router_aux_loss_coef);
  TITAN_CHECK(std::isfinite(bias_update_rate) && bias_update_rate >= 0,
              "[model] the expert-bias update rate must be >= 0, got ", bias_update_rate);
}

bool DecoderConfig::is_linear_attention_layer(int64_t layer) const {
  return !layer_types.empty() && layer_types[static_cast<size_t>(layer)] == "linear_attention";
}

int64_t DecoderConfig::num_linear_attention_layers() const {
  return std::count(layer_types.begin(), layer_types.end(), "linear_attention");
}

int64_t DecoderConfig::rotary_dim() const {
  return partial_rotary_factor >= 1.0f ? head_dim
                                       : static_cast<int64_t>(static_cast<double>(head_dim) * partial_rotary_factor);
}

double DecoderConfig::full_attention_params() const {
  const double d = static_cast<double>(dim), k = static_cast<double>(head_dim);
  const double q = static_cast<double>(num_heads) * k, kv = static_cast<double>(num_kv_heads) * k;
  double attn = d * q * (attn_output_gate ? 2 : 1) + 2 * d * kv + q * d;
  if (attention_bias || qkv_bias) attn += q + 2 * kv;
  if (attention_bias) attn += d;
  if (qk_norm) attn += 2 * k;
  return attn + 2 * d;
}

double DecoderConfig::linear_attention_params() const {
  const double d = static_cast<double>(dim), hv = static_cast<double>(linear_num_value_heads);
  const double v = hv * static_cast<double>(linear_value_head_dim);
  const double c = 2 * static_cast<double>(linear_num_key_heads * linear_key_head_dim) + v;
  // in_proj_qkv, in_proj_z, in_proj_b and _a, out_proj, conv1d, A_log and dt_bias, the gated norm,
  // and the block's two norms.
  return d * c + d * v + 2 * d * hv + v * d + c * static_cast<double>(linear_conv_kernel_dim) + 2 * hv +
         static_cast<double>(linear_value_head_dim) + 2 * d;
}

bool DecoderConfig::is_moe_layer(int64_t layer) const {
  if (num_experts == 0 || decoder_sparse_step <= 0) return false;
  if (std::find(mlp_only_layers.begin(), mlp_only_layers.end(), layer) != mlp_only_layers.end()) return false;
  return (layer + 1) % decoder_sparse_step == 0;
}

// Closed form, not a loop over the layers: the memory check calls it on any num_layers a
// config.json holds (1e9). Layers l with (l + 1) % step == 0 below num_layers, less the distinct
// mlp_only_layers among them.
int64_t DecoderConfig::num_moe_layers() const {
  if (num_experts == 0 || decoder_sparse_step <= 0) return 0;
  int64_t n = num_layers / decoder_sparse_step;
  std::vector<int64_t> dense = mlp_only_layers;
  std::sort(dense.begin(), dense.end());
  dense.erase(std::unique(dense.begin(), dense.end()), dense.end());
  for (int64_t l : dense) n -= l >= 0 && l < num_layers && (l + 1) % decoder_sparse_step == 0;
  return n;
}

}  // namespace titan::nn
