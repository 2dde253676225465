// libFuzzer target: config.json parsing, the path Qwen3 loading takes (read_json_file ->
// parse_json_strict -> models::config_from_hf) minus the file read. titan::Error is the answer to
// bad JSON or a bad config; anything else escaping (a raw nlohmann exception included), a crash
// or an ASan/UBSan report is a finding.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "titan/checkpoint/json_file.h"
#include "titan/core/error.h"
#include "titan/models/decoder/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const nlohmann::json j =
        titan::ckpt::parse_json_strict(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz/config.json");
    const titan::nn::DecoderConfig c = titan::models::config_from_hf(j, "fuzz/config.json");
    // What an accepted config promises: validate()'s sizes, finite float fields, a context length.
    if (c.vocab_size <= 0 || c.dim <= 0 || c.num_layers <= 0 || c.num_heads <= 0 || c.num_kv_heads <= 0 ||
        c.head_dim <= 0 || c.hidden_dim <= 0 || c.num_heads % c.num_kv_heads != 0 || c.max_seq_len <= 0 ||
        !std::isfinite(c.rope_theta) || !(c.rope_theta > 0) || !std::isfinite(c.norm_eps) || !(c.norm_eps >= 0)) {
      __builtin_trap();
    }
  } catch (const titan::Error&) {
  }
  return 0;
}
