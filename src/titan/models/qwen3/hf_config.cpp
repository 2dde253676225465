#include "titan/models/qwen3/hf_config.h"

namespace titan::qwen3 {

using nlohmann::json;

namespace {

class Reader {
 public:
  Reader(const json& j, const std::string& source) : j_(j), source_(source) {}

  int64_t integer(const char* key, int64_t fallback) const {
    if (!present(key)) return fallback;
    const json& v = j_.at(key);
    TITAN_CHECK(v.is_number_integer(), source_, ": field '", key, "' must be an integer, got ", v.dump());
    return v.get<int64_t>();
  }
  double number(const char* key, double fallback) const {
    if (!present(key)) return fallback;
    const json& v = j_.at(key);
    TITAN_CHECK(v.is_number(), source_, ": field '", key, "' must be a number, got ", v.dump());
    return v.get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!present(key)) return fallback;
    const json& v = j_.at(key);
    TITAN_CHECK(v.is_boolean(), source_, ": field '", key, "' must be true or false, got ", v.dump());
    return v.get<bool>();
  }
  bool present(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }

 private:
  const json& j_;
  const std::string& source_;
};

}  // namespace

nn::DecoderConfig config_from_hf(const json& config, const std::string& source) {
  TITAN_CHECK(config.is_object(), source, ": expected a JSON object");
  const Reader r(config, source);

  TITAN_CHECK(config.contains("architectures") && config["architectures"].is_array() &&
                  config["architectures"].size() == 1 && config["architectures"][0].is_string(),
              source, ": field 'architectures' must be a one-element list such as [\"Qwen3ForCausalLM\"]");
  const std::string arch = config["architectures"][0].get<std::string>();
  TITAN_CHECK(arch == "Qwen3ForCausalLM", source, ": architecture '", arch,
              "' is not supported. HINT: supported: Qwen3ForCausalLM");

  if (r.present("hidden_act")) {
    TITAN_CHECK(config["hidden_act"] == "silu", source, ": field 'hidden_act' is ",
                config["hidden_act"].dump(), "; only \"silu\" (SwiGLU) is supported");
  }
  TITAN_CHECK(!r.present("rope_scaling"), source, ": field 'rope_scaling' is ",
              config["rope_scaling"].dump(), "; RoPE scaling is not supported. HINT: set it to null");
  TITAN_CHECK(!r.boolean("use_sliding_window", false), source,
              ": field 'use_sliding_window' is true; sliding-window attention is not supported");
  TITAN_CHECK(r.number("attention_dropout", 0.0) == 0.0, source,
              ": field 'attention_dropout' must be 0 (attention dropout is not supported)");
  if (r.present("layer_types")) {
    for (const json& t : config["layer_types"]) {
      TITAN_CHECK(t == "full_attention", source, ": field 'layer_types' contains ", t.dump(),
                  "; only \"full_attention\" is supported");
    }
  }

  // transformers 5 writes rope_parameters {rope_theta, rope_type}; the Hub's files a top-level
  // rope_theta. Qwen3Config's default theta is 10000.
  double theta = r.number("rope_theta", 10000.0);
  if (r.present("rope_parameters")) {
    const json& rp = config["rope_parameters"];
    TITAN_CHECK(rp.is_object(), source, ": field 'rope_parameters' must be an object");
    const Reader rr(rp, source);
    if (rp.contains("rope_type")) {
      TITAN_CHECK(rp["rope_type"] == "default", source, ": field 'rope_parameters.rope_type' is ",
                  rp["rope_type"].dump(), "; only \"default\" RoPE is supported");
    }
    theta = rr.number("rope_theta", theta);
  }

  nn::DecoderConfig c;
  c.vocab_size = r.integer("vocab_size", 151936);
  c.dim = r.integer("hidden_size", 4096);
  c.hidden_dim = r.integer("intermediate_size", 22016);
  c.num_layers = r.integer("num_hidden_layers", 32);
  c.num_heads = r.integer("num_attention_heads", 32);
  c.num_kv_heads = r.integer("num_key_value_heads", c.num_heads);
  c.head_dim = r.integer("head_dim", 128);
  c.norm_eps = static_cast<float>(r.number("rms_norm_eps", 1e-6));
  c.rope_theta = static_cast<float>(theta);
  c.tie_embeddings = r.boolean("tie_word_embeddings", false);
  c.attention_bias = r.boolean("attention_bias", false);
  c.qk_norm = true;
  c.max_seq_len = r.integer("max_position_embeddings", 32768);
  try {
    c.validate();
  } catch (const Error& e) {
    TITAN_FAIL(source, ": ", e.what());
  }
  return c;
}

}  // namespace titan::qwen3
