// DecoderConfig::validate, apart from decoder.cpp so that config parsing (qwen3/hf_config.cpp) can
// be built without the layers and kernels: the config.json fuzz target (tests/fuzz) compiles just
// these two files (clang cannot build the AVX-512 kernels in titan_ops).
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
}

}  // namespace titan::nn
