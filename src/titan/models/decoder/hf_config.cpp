#include "titan/models/decoder/hf_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <vector>

namespace titan::models {

using nlohmann::json;

namespace {

// What each supported architecture's transformers config class does with an absent field.
struct ArchDefaults {
  const char* architecture;
  const char* model_type;
  int64_t vocab_size, hidden_size, intermediate_size, num_layers, num_heads;
  int64_t num_kv_heads;       // -1: num_attention_heads (the field's default is None)
  int64_t head_dim;           // -1: hidden_size / num_attention_heads
  int64_t max_position_embeddings;
  bool qk_norm;
  bool reads_attention_bias;  // attention_bias -> q/k/v/o biases (else: the fixed layout below)
  bool fixed_qkv_bias;        // Qwen2: q/k/v biases always, no o bias
  bool reads_mlp_bias;        // Llama
  bool moe;                   // reads the Qwen3MoeConfig fields
  bool qwen3_5 = false;       // reads Qwen3_5TextConfig's fields (layer_types, linear attention, ...)
};

constexpr ArchDefaults kArchs[] = {
    {"Qwen3ForCausalLM", "qwen3", 151936, 4096, 22016, 32, 32, 32, 128, 32768, true, true, false, false, false},
    {"Qwen3MoeForCausalLM", "qwen3_moe", 151936, 2048, 6144, 24, 32, 4, -1, 32768, true, true, false, false, true},
    {"Qwen2ForCausalLM", "qwen2", 151936, 4096, 22016, 32, 32, 32, -1, 32768, false, false, true, false, false},
    {"LlamaForCausalLM", "llama", 32000, 4096, 11008, 32, 32, -1, -1, 2048, false, true, false, true, false},
    {"MistralForCausalLM", "mistral", 32000, 4096, 14336, 32, 32, 8, -1, 131072, false, false, false, false, false},
    {"Qwen3_5ForCausalLM", "qwen3_5_text", 248320, 4096, 12288, 32, 16, 4, 256, 32768, true, true, false, false, false,
     true},
    {"Qwen3_5MoeForCausalLM", "qwen3_5_moe_text", 248320, 2048, 5632, 40, 16, 2, 256, 32768, true, true, false, false,
     true, true},
};

// The multimodal Qwen3.5 folders (Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration):
// the language model is a Qwen3_5(Moe)ForCausalLM under text_config, read as a text model (the
// vision tower is not trained).
constexpr std::pair<const char*, const char*> kQwen3_5Multimodal[] = {
    {"Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"},
    {"Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM"}};

std::string supported_list() {
  std::string out;
  for (const ArchDefaults& a : kArchs) out += (out.empty() ? "" : ", ") + std::string(a.architecture);
  for (const auto& [multimodal, text] : kQwen3_5Multimodal) out += ", " + std::string(multimodal);
  return out;
}

const ArchDefaults* find_arch(const std::string& name) {
  for (const ArchDefaults& a : kArchs) {
    if (name == a.architecture) return &a;
  }
  return nullptr;
}

class Reader {
 public:
  Reader(const json& j, const std::string& source) : j_(j), source_(source) {}

  int64_t integer(const char* key, int64_t fallback) const {
    if (!present(key)) return fallback;
    const json& v = j_.at(key);
    TITAN_CHECK(v.is_number_integer(), source_, ": field '", key, "' must be an integer, got ", v.dump());
    // nlohmann keeps 2^63 .. 2^64-1 unsigned; get<int64_t> would wrap them negative.
    TITAN_CHECK(!v.is_number_unsigned() || v.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX), source_,
                ": field '", key, "' is ", v.dump(), ", out of range (at most ", INT64_MAX, ")");
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
  bool null(const char* key) const { return j_.contains(key) && j_.at(key).is_null(); }

 private:
  const json& j_;
  const std::string& source_;
};

// A number in the RoPE block, or `fallback` when absent or null.
double rope_number(const json& rp, const char* key, const std::string& where, double fallback) {
  if (!rp.contains(key) || rp[key].is_null()) return fallback;
  TITAN_CHECK(rp[key].is_number(), where, ".", key, " must be a number, got ", rp[key].dump());
  return rp[key].get<double>();
}

std::vector<double> rope_list(const json& rp, const char* key, const std::string& where) {
  TITAN_CHECK(rp.contains(key) && rp[key].is_array(), where, ".", key, " must be a list of numbers (longrope), got ",
              rp.contains(key) ? rp[key].dump() : "nothing");
  std::vector<double> out;
  for (const json& v : rp[key]) {
    TITAN_CHECK(v.is_number(), where, ".", key, " must hold numbers, got ", v.dump());
    out.push_back(v.get<double>());
  }
  return out;
}

// The keys each rope_type reads (transformers' _validate_*_rope_parameters: required + optional);
// any other key would change math titan does not do, so it is refused by name.
struct RopeTypeKeys {
  const char* name;
  ops::RopeType type;
  std::vector<std::string> keys;
};

const std::vector<RopeTypeKeys>& rope_type_keys() {
  static const std::vector<RopeTypeKeys> k = {
      {"default", ops::RopeType::default_, {}},
      {"linear", ops::RopeType::linear, {"factor"}},
      {"dynamic", ops::RopeType::dynamic, {"factor"}},
      {"yarn", ops::RopeType::yarn, {"factor", "attention_factor", "beta_fast", "beta_slow", "original_max_position_embeddings",
                                     "mscale", "mscale_all_dim", "truncate"}},
      {"llama3", ops::RopeType::llama3, {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"}},
      {"longrope", ops::RopeType::longrope, {"factor", "attention_factor", "original_max_position_embeddings", "long_factor",
                                             "short_factor"}},
  };
  return k;
}

// The RoPE block (rope_scaling wins over rope_parameters, as in transformers' standardize_rope_params),
// read into `c.rope_scaling` as transformers' ROPE_INIT_FUNCTIONS read it; returns its theta, or
// `theta` when it names none. The block is kept as text for export (written back unchanged).
double read_rope(const json& config, const Reader& r, const std::string& source, double theta, nn::DecoderConfig& c,
                 bool qwen3_5) {
  const char* key = r.present("rope_scaling") ? "rope_scaling" : r.present("rope_parameters") ? "rope_parameters" : nullptr;
  c.rope_scaling = ops::RopeScaling{};
  if (key == nullptr) return theta;
  const json& rp = config[key];
  const std::string where = source + ": field '" + key + "'";
  TITAN_CHECK(rp.is_object(), where, " must be an object or null, got ", rp.dump());
  // "type" is the pre-4.45 spelling of "rope_type".
  const char* type_key = rp.contains("rope_type") ? "rope_type" : rp.contains("type") ? "type" : nullptr;
  const std::string type_name = type_key == nullptr ? "default" : rp[type_key].is_string() ? rp[type_key].get<std::string>() : rp[type_key].dump();
  const RopeTypeKeys* kind = nullptr;
  for (const RopeTypeKeys& k : rope_type_keys()) {
    if (type_name == k.name) kind = &k;
  }
  TITAN_CHECK(kind != nullptr, where, ": rope_type '", type_name, "' is not supported. HINT: supported: default, linear, "
              "dynamic, yarn, llama3, longrope");
  for (const auto& [k, v] : rp.items()) {
    // Qwen3.5: a partial rotary factor, and the MRoPE sections, which text positions (the same for
    // every section) reduce to plain RoPE over the rotated lanes.
    const bool qwen3_5_key = qwen3_5 && (k == "partial_rotary_factor" || k == "mrope_section" || k == "mrope_interleaved");
    const bool known = k == "rope_type" || k == "type" || k == "rope_theta" || qwen3_5_key ||
                       std::find(kind->keys.begin(), kind->keys.end(), k) != kind->keys.end();
    TITAN_CHECK(known || (k == "partial_rotary_factor" && v.is_number() && v.get<double>() == 1.0), where, ": key '", k,
                "' = ", v.dump(), " is not read by rope_type '", type_name, "'",
                k == "partial_rotary_factor" ? " (only full-width RoPE, 1.0, is supported)" : "",
                ". HINT: remove it, or use a config transformers accepts for this model");
  }
  if (qwen3_5 && rp.contains("partial_rotary_factor")) {
    const double f = rope_number(rp, "partial_rotary_factor", where, 0.25);
    TITAN_CHECK(f > 0 && f <= 1, where, ".partial_rotary_factor must be in (0, 1], got ", f);
    c.partial_rotary_factor = static_cast<float>(f);
  }
  ops::RopeScaling& s = c.rope_scaling;
  s.type = kind->type;
  s.hf_key = key;
  s.hf_json = rp.dump();
  s.max_position_embeddings = c.max_seq_len;
  s.factor = rope_number(rp, "factor", where, s.type == ops::RopeType::default_ ? 1.0 : 0.0);
  if (s.type == ops::RopeType::linear || s.type == ops::RopeType::dynamic || s.type == ops::RopeType::yarn ||
      s.type == ops::RopeType::llama3) {
    TITAN_CHECK(rp.contains("factor") && s.factor > 0 && std::isfinite(s.factor), where, ": rope_type '", type_name,
                "' needs a positive \"factor\", got ", rp.value("factor", json()).dump());
  }
  // standardize_rope_params: a top-level original_max_position_embeddings (Phi3's layout) wins over
  // the block's, which defaults to max_position_embeddings.
  const bool top_original = r.present("original_max_position_embeddings");
  s.original_max_position_embeddings =
      top_original ? static_cast<double>(r.integer("original_max_position_embeddings", 0))
                   : rope_number(rp, "original_max_position_embeddings", where, static_cast<double>(c.max_seq_len));
  if (s.type == ops::RopeType::longrope && !(rp.contains("factor") && !rp["factor"].is_null())) {
    s.factor = static_cast<double>(c.max_seq_len) / static_cast<double>(s.original_max_position_embeddings);
  }
  if (rp.contains("attention_factor") && !rp["attention_factor"].is_null()) {
    TITAN_CHECK(rope_number(rp, "attention_factor", where, 0) > 0, where, ".attention_factor must be > 0, got ",
                rp["attention_factor"].dump(), ". HINT: remove it to use the type's default");
  }
  if (s.type == ops::RopeType::llama3) {
    TITAN_CHECK(rp.contains("low_freq_factor") && rp.contains("high_freq_factor"), where,
                ": rope_type 'llama3' needs low_freq_factor and high_freq_factor. HINT: Llama 3.1 uses 1 and 4");
    s.low_freq_factor = rope_number(rp, "low_freq_factor", where, 0);
    s.high_freq_factor = rope_number(rp, "high_freq_factor", where, 0);
  }
  if (s.type == ops::RopeType::yarn) {
    // beta_fast / beta_slow: `or 32` / `or 1` in transformers, so 0 and null mean the default too.
    s.beta_fast = rope_number(rp, "beta_fast", where, 0);
    if (s.beta_fast == 0) s.beta_fast = 32;
    s.beta_slow = rope_number(rp, "beta_slow", where, 0);
    if (s.beta_slow == 0) s.beta_slow = 1;
    s.attention_factor = rope_number(rp, "attention_factor", where, 0);
    s.mscale = rope_number(rp, "mscale", where, 0);
    s.mscale_all_dim = rope_number(rp, "mscale_all_dim", where, 0);
    if (rp.contains("truncate")) {  // HF: rope_parameters.get("truncate", True), so null is falsy
      TITAN_CHECK(rp["truncate"].is_boolean() || rp["truncate"].is_null(), where, ".truncate must be true or false, got ",
                  rp["truncate"].dump());
      s.truncate = rp["truncate"].is_boolean() && rp["truncate"].get<bool>();
    }
  }
  if (s.type == ops::RopeType::longrope) {
    s.long_factor = rope_list(rp, "long_factor", where);
    s.short_factor = rope_list(rp, "short_factor", where);
    s.attention_factor = rope_number(rp, "attention_factor", where, 0);
  }
  const double rope_theta = Reader(rp, source).number("rope_theta", theta);
  if (s.type == ops::RopeType::yarn) {
    // Transformers divides by log(rope_theta) (ZeroDivisionError at 1) and takes the log of each
    // beta (NaN logits below 0): refused here, naming the field, instead of training on NaN.
    TITAN_CHECK(rope_theta > 1, where, ": rope_type 'yarn' needs rope_theta > 1 (its correction range divides by ",
                "log(rope_theta)), got ", rope_theta);
    TITAN_CHECK(s.beta_fast > 0 && s.beta_slow > 0, where, ": yarn's beta_fast and beta_slow must be > 0, got ",
                s.beta_fast, " and ", s.beta_slow, ". HINT: remove them for the defaults 32 and 1");
  }
  if (qwen3_5 && rp.contains("mrope_section")) {
    const json& m = rp["mrope_section"];
    bool ok = m.is_array();
    for (const json& v : ok ? m : json::array()) ok = ok && v.is_number_integer() && v.get<int64_t>() >= 0;
    TITAN_CHECK(ok, where, ".mrope_section must be a list of section sizes (Qwen3.5: [11, 11, 10]), got ", m.dump());
  }
  if (qwen3_5 && rp.contains("mrope_interleaved")) {
    TITAN_CHECK(rp["mrope_interleaved"].is_boolean(), where, ".mrope_interleaved must be true or false, got ",
                rp["mrope_interleaved"].dump());
  }
  return rope_theta;
}

// The shortest decimal that reads back as `f` (1e-06, not 9.99999997e-07).
double shortest(float f) {
  char buf[32];
  const auto res = std::to_chars(buf, buf + sizeof(buf), f);
  *res.ptr = '\0';
  return std::strtod(buf, nullptr);
}

// Qwen3MoeConfig's fields and defaults (num_local_experts is the attribute num_experts maps to).
template <class Float32>
void read_moe(const json& config, const Reader& r, const std::string& source, nn::DecoderConfig& c,
              const Float32& float32) {
  const char* experts_key = r.present("num_experts") || !r.present("num_local_experts") ? "num_experts" : "num_local_experts";
  c.num_experts = r.integer(experts_key, 128);
  c.num_experts_per_tok = r.integer("num_experts_per_tok", 8);
  c.moe_hidden_dim = r.integer("moe_intermediate_size", 768);
  c.norm_topk_prob = r.boolean("norm_topk_prob", false);
  c.decoder_sparse_step = r.integer("decoder_sparse_step", 1);
  c.mlp_only_layers.clear();
  if (r.present("mlp_only_layers")) {
    const json& layers = config["mlp_only_layers"];
    TITAN_CHECK(layers.is_array(), source, ": field 'mlp_only_layers' must be a list of layer indices, got ",
                layers.dump());
    for (const json& layer : layers) {
      TITAN_CHECK(layer.is_number_integer(), source, ": field 'mlp_only_layers' must hold integers, got ",
                  layer.dump());
      c.mlp_only_layers.push_back(layer.get<int64_t>());
    }
  }
  c.router_aux_loss_coef = float32("router_aux_loss_coef", r.number("router_aux_loss_coef", 0.001), true);
  c.load_balance = r.boolean("output_router_logits", false) ? nn::LoadBalance::aux_loss : nn::LoadBalance::none;
  TITAN_CHECK(c.num_experts > 0, source, ": field '", experts_key, "' must be > 0 for ", "Qwen3MoeForCausalLM, got ",
              c.num_experts, ". HINT: a dense model is Qwen3ForCausalLM");
}

// Qwen3_5TextConfig's fields beyond Qwen3's, with its defaults: the layer kinds (absent: every 4th
// layer full attention, full_attention_interval), the gated DeltaNet's heads, the partial RoPE
// (0.25 unless the RoPE block says otherwise), the attention output gate and the zero-centred norms
// (always, in Qwen3_5Attention and Qwen3_5RMSNorm).
void read_qwen3_5(const json& config, const Reader& r, const std::string& source, nn::DecoderConfig& c) {
  if (r.present("layer_types")) {
    for (const json& t : config["layer_types"]) c.layer_types.push_back(t.get<std::string>());
  } else {
    const int64_t interval = r.integer("full_attention_interval", 4);
    TITAN_CHECK(interval > 0, source, ": field 'full_attention_interval' must be > 0, got ", interval);
    TITAN_CHECK(c.num_layers >= 0 && c.num_layers <= 1000000, source, ": field 'num_hidden_layers' is ", c.num_layers,
                ". HINT: a Qwen3.5 model lists its layer kinds per layer");
    for (int64_t i = 0; i < c.num_layers; ++i) {
      c.layer_types.push_back((i + 1) % interval == 0 ? "full_attention" : "linear_attention");
    }
  }
  c.linear_num_key_heads = r.integer("linear_num_key_heads", 16);
  c.linear_key_head_dim = r.integer("linear_key_head_dim", 128);
  c.linear_num_value_heads = r.integer("linear_num_value_heads", 32);
  c.linear_value_head_dim = r.integer("linear_value_head_dim", 128);
  c.linear_conv_kernel_dim = r.integer("linear_conv_kernel_dim", 4);
  // A causal convolution wider than the context reads nothing more: a typo (Qwen3.5 uses 4), and
  // one that sizes the conv weights of every layer.
  TITAN_CHECK(c.linear_conv_kernel_dim >= 1 && c.linear_conv_kernel_dim <= c.max_seq_len, source,
              ": field 'linear_conv_kernel_dim' is ", c.linear_conv_kernel_dim, "; it must be in [1, ", c.max_seq_len,
              "] (max_position_embeddings). HINT: Qwen3.5 uses 4");
  c.partial_rotary_factor = static_cast<float>(r.number("partial_rotary_factor", 0.25));
  c.attn_output_gate = true;
  c.zero_centered_norms = true;
}

}  // namespace

nn::DecoderConfig config_from_hf(const json& config, const std::string& source) {
  TITAN_CHECK(config.is_object(), source, ": expected a JSON object");
  const Reader r(config, source);

  TITAN_CHECK(config.contains("architectures") && config["architectures"].is_array() &&
                  config["architectures"].size() == 1 && config["architectures"][0].is_string(),
              source, ": field 'architectures' must be a one-element list such as [\"Qwen3ForCausalLM\"]");
  const std::string arch_name = config["architectures"][0].get<std::string>();
  for (const auto& [multimodal, text_arch] : kQwen3_5Multimodal) {
    if (arch_name != multimodal) continue;
    TITAN_CHECK(config.contains("text_config") && config["text_config"].is_object(), source,
                ": field 'text_config' (the language model of a ", multimodal,
                " folder) is missing or not an object. HINT: use the folder as published, with its config.json whole");
    json text = config["text_config"];
    text["architectures"] = {text_arch};
    // Qwen3_5Config's own tie_word_embeddings (default false) decides the head.
    text["tie_word_embeddings"] = r.boolean("tie_word_embeddings", false);
    return config_from_hf(text, source + " text_config");
  }
  const ArchDefaults* arch = find_arch(arch_name);
  TITAN_CHECK(arch != nullptr, source, ": field 'architectures': architecture '", arch_name,
              "' is not supported. HINT: supported: ", supported_list());

  if (r.present("hidden_act")) {
    TITAN_CHECK(config["hidden_act"] == "silu", source, ": field 'hidden_act' is ",
                config["hidden_act"].dump(), "; only \"silu\" (SwiGLU) is supported");
  }
  TITAN_CHECK(r.number("attention_dropout", 0.0) == 0.0, source,
              ": field 'attention_dropout' must be 0 (attention dropout is not supported)");
  TITAN_CHECK(arch->qwen3_5 || !r.present("partial_rotary_factor") || r.number("partial_rotary_factor", 1.0) == 1.0, source,
              ": field 'partial_rotary_factor' is ", config.value("partial_rotary_factor", json()).dump(),
              "; only full-width RoPE (1.0) is supported");
  if (arch_name == "MistralForCausalLM") {
    // MistralConfig: sliding_window defaults to 4096 and is active unless null.
    const int64_t max_pos = r.integer("max_position_embeddings", arch->max_position_embeddings);
    const int64_t window = r.null("sliding_window") ? -1 : r.integer("sliding_window", 4096);
    TITAN_CHECK(window < 0 || window >= max_pos, source, ": field 'sliding_window' is ", window,
                " (", r.present("sliding_window") ? "set" : "MistralConfig's default",
                ", below max_position_embeddings ", max_pos,
                "); sliding-window attention is not supported. HINT: set \"sliding_window\": null");
  } else {
    TITAN_CHECK(!r.boolean("use_sliding_window", false), source,
                ": field 'use_sliding_window' is true; sliding-window attention is not supported. "
                "HINT: set it to false");
  }
  if (r.present("layer_types")) {
    TITAN_CHECK(config["layer_types"].is_array(), source, ": field 'layer_types' must be a list");
    for (const json& t : config["layer_types"]) {
      TITAN_CHECK(t == "full_attention" || (arch->qwen3_5 && t == "linear_attention"), source,
                  ": field 'layer_types' contains ", t.dump(), ", a layer kind titan does not know. HINT: ",
                  arch->qwen3_5 ? "\"full_attention\" or \"linear_attention\"" : "only \"full_attention\" for this architecture");
    }
  }
  nn::DecoderConfig c;
  c.vocab_size = r.integer("vocab_size", arch->vocab_size);
  c.dim = r.integer("hidden_size", arch->hidden_size);
  c.hidden_dim = r.integer("intermediate_size", arch->intermediate_size);
  c.num_layers = r.integer("num_hidden_layers", arch->num_layers);
  c.num_heads = r.integer("num_attention_heads", arch->num_heads);
  // Absent: the class default; null: num_attention_heads (every class does this in __post_init__).
  const int64_t kv_default = arch->num_kv_heads < 0 || r.null("num_key_value_heads") ? c.num_heads : arch->num_kv_heads;
  c.num_kv_heads = r.integer("num_key_value_heads", kv_default);
  TITAN_CHECK(c.num_heads > 0, source, ": field 'num_attention_heads' must be > 0, got ", c.num_heads);
  c.head_dim = r.integer("head_dim", arch->head_dim > 0 ? arch->head_dim : c.dim / c.num_heads);
  // float32 fields: a double beyond float's range (1e39) would silently become inf.
  auto float32 = [&](const char* key, double v, bool allow_zero) {
    TITAN_CHECK(std::isfinite(v) && std::fabs(v) <= std::numeric_limits<float>::max() &&
                    (v > 0 || (allow_zero && v == 0)),
                source, ": field '", key, "' must be ", allow_zero ? "non-negative" : "positive",
                " and fit a float32, got ", v);
    return static_cast<float>(v);
  };
  c.norm_eps = float32("rms_norm_eps", r.number("rms_norm_eps", 1e-6), true);
  c.max_seq_len = r.integer("max_position_embeddings", arch->max_position_embeddings);
  TITAN_CHECK(c.max_seq_len > 0, source, ": field 'max_position_embeddings' must be > 0, got ", c.max_seq_len);
  // transformers 5 writes rope_parameters {rope_theta, rope_type, ...}; the Hub's files a top-level
  // rope_theta (and maybe rope_scaling). Every supported config class defaults theta to 10000.
  if (arch->qwen3_5) read_qwen3_5(config, r, source, c);
  const double theta = read_rope(config, r, source, r.number("rope_theta", 10000.0), c, arch->qwen3_5);
  c.rope_theta = float32("rope_theta", theta, false);
  c.tie_embeddings = r.boolean("tie_word_embeddings", false);
  c.qk_norm = arch->qk_norm;
  c.attention_bias = arch->reads_attention_bias && r.boolean("attention_bias", false);
  c.qkv_bias = arch->fixed_qkv_bias;
  c.mlp_bias = arch->reads_mlp_bias && r.boolean("mlp_bias", false);
  if (arch->moe) read_moe(config, r, source, c, float32);
  if (arch->moe && arch->qwen3_5) {
    // Qwen3_5MoeSparseMoeBlock: every layer sparse, the top-k always renormalised, a shared expert.
    c.norm_topk_prob = true;
    c.decoder_sparse_step = 1;
    c.mlp_only_layers.clear();
    c.shared_expert_dim = r.integer("shared_expert_intermediate_size", 512);
    TITAN_CHECK(c.shared_expert_dim > 0, source, ": field 'shared_expert_intermediate_size' must be > 0, got ",
                c.shared_expert_dim);
  }
  try {
    c.validate();
  } catch (const Error& e) {
    TITAN_FAIL(source, ": ", e.what());
  }
  return c;
}

std::string default_hf_architecture(const nn::DecoderConfig& c) {
  if (c.attn_output_gate || c.zero_centered_norms || !c.layer_types.empty()) {
    return c.num_experts > 0 ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM";
  }
  if (c.num_experts > 0) return "Qwen3MoeForCausalLM";
  if (c.qk_norm) return "Qwen3ForCausalLM";
  if (c.qkv_bias && !c.attention_bias && !c.mlp_bias) return "Qwen2ForCausalLM";
  return "LlamaForCausalLM";
}

json config_to_hf(const nn::DecoderConfig& c, const std::string& architecture, const std::string& torch_dtype) {
  const ArchDefaults* arch = find_arch(architecture);
  TITAN_CHECK(arch != nullptr, "[hf export] architecture '", architecture,
              "' is not supported. HINT: use one of ", supported_list());
  TITAN_CHECK(torch_dtype == "float32" || torch_dtype == "bfloat16", "[hf export] dtype '", torch_dtype,
              "' is not float32 or bfloat16");
  // What the architecture builds must be exactly our decoder, or transformers would load other math.
  const bool qkv = c.attention_bias || c.qkv_bias, out = c.attention_bias;
  TITAN_CHECK((c.num_experts > 0) == arch->moe, "[hf export] ", architecture, " cannot express a ",
              c.num_experts > 0 ? "mixture-of-experts" : "dense", " model. HINT: export as ", default_hf_architecture(c));
  const bool qwen3_5 = c.attn_output_gate || c.zero_centered_norms || !c.layer_types.empty();
  TITAN_CHECK(qwen3_5 == arch->qwen3_5 && (!qwen3_5 || (c.attn_output_gate && c.zero_centered_norms)), "[hf export] ",
              architecture, " cannot express this model (attention output gate ", c.attn_output_gate,
              ", zero-centred norms ", c.zero_centered_norms, ", ", c.layer_types.size(),
              " layer types). HINT: export as ", default_hf_architecture(c));
  const bool expressible = c.qk_norm == arch->qk_norm && (arch->reads_mlp_bias || !c.mlp_bias) &&
                           (arch->fixed_qkv_bias ? (qkv && !out)
                                                 : arch->reads_attention_bias ? qkv == out : !qkv);
  TITAN_CHECK(expressible, "[hf export] ", architecture, " cannot express this model (q/k norm ", c.qk_norm,
              ", q/k/v bias ", qkv, ", o bias ", out, ", mlp bias ", c.mlp_bias, "). HINT: export as ",
              default_hf_architecture(c));
  json j;
  j["architectures"] = {architecture};
  j["model_type"] = arch->model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.dim;
  j["intermediate_size"] = c.hidden_dim;
  j["num_hidden_layers"] = c.num_layers;
  j["num_attention_heads"] = c.num_heads;
  j["num_key_value_heads"] = c.num_kv_heads;
  j["head_dim"] = c.head_dim;
  j["hidden_act"] = "silu";
  j["max_position_embeddings"] = c.max_seq_len;
  j["rms_norm_eps"] = shortest(c.norm_eps);
  j["rope_theta"] = shortest(c.rope_theta);
  j["rope_scaling"] = nullptr;
  // A scaled RoPE goes back as the block it was read from, unchanged (same key, same values).
  if (!c.rope_scaling.hf_key.empty()) {
    if (c.rope_scaling.hf_key != "rope_scaling") j.erase("rope_scaling");
    j[c.rope_scaling.hf_key] = json::parse(c.rope_scaling.hf_json);
  }
  j["tie_word_embeddings"] = c.tie_embeddings;
  j["attention_dropout"] = 0.0;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype;  // transformers < 5
  j["dtype"] = torch_dtype;        // transformers >= 5
  if (arch->reads_attention_bias) j["attention_bias"] = c.attention_bias;
  if (arch->reads_mlp_bias) j["mlp_bias"] = c.mlp_bias;
  if (arch->moe && arch->qwen3_5) {
    j["num_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["moe_intermediate_size"] = c.moe_hidden_dim;
    j["shared_expert_intermediate_size"] = c.shared_expert_dim;
    j["output_router_logits"] = c.load_balance == nn::LoadBalance::aux_loss;
    j["router_aux_loss_coef"] = shortest(c.router_aux_loss_coef);
  } else if (arch->moe) {
    j["num_experts"] = c.num_experts;
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["moe_intermediate_size"] = c.moe_hidden_dim;
    j["norm_topk_prob"] = c.norm_topk_prob;
    j["decoder_sparse_step"] = c.decoder_sparse_step;
    j["mlp_only_layers"] = c.mlp_only_layers;
    // Bias balancing has no HF counterpart: the export routes without the bias (titan logs it).
    j["output_router_logits"] = c.load_balance == nn::LoadBalance::aux_loss;
    j["router_aux_loss_coef"] = shortest(c.router_aux_loss_coef);
  }
  if (arch->qwen3_5) {
    j["layer_types"] = c.layer_types;
    j["linear_num_key_heads"] = c.linear_num_key_heads;
    j["linear_key_head_dim"] = c.linear_key_head_dim;
    j["linear_num_value_heads"] = c.linear_num_value_heads;
    j["linear_value_head_dim"] = c.linear_value_head_dim;
    j["linear_conv_kernel_dim"] = c.linear_conv_kernel_dim;
    if (c.rope_scaling.hf_key != "rope_scaling") {  // transformers 5's layout: theta inside rope_parameters
      j.erase("rope_theta");
      j.erase("rope_scaling");
    }
    if (c.rope_scaling.hf_key.empty()) {  // a named spec: its own RoPE block
      j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", shortest(c.rope_theta)},
                              {"partial_rotary_factor", shortest(c.partial_rotary_factor)}};
    }
    return j;
  }
  if (architecture == "MistralForCausalLM") {
    j["sliding_window"] = nullptr;  // absent would mean MistralConfig's active 4096 window
  } else if (architecture != "LlamaForCausalLM") {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = c.num_layers;
  }
  return j;
}

}  // namespace titan::models
