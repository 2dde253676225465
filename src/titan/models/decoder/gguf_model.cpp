#include "titan/models/decoder/gguf_model.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "titan/checkpoint/atomic_file.h"
#include "titan/checkpoint/json_file.h"
#include "titan/core/dtype.h"
#include "titan/core/log.h"
#include "titan/models/decoder/hf_config.h"
#include "titan/models/decoder/hf_names.h"
#include "titan/nn/lora.h"

namespace titan::models {
namespace {

namespace fs = std::filesystem;
using ckpt::GgufKind;
using ckpt::GgufValue;

// {titan FQN suffix, GGUF name suffix} of a layer's tensors; the top level apart.
const std::pair<const char*, const char*> kTopLevel[] = {
    {"tok_embeddings.weight", "token_embd.weight"},
    {"norm.weight", "output_norm.weight"},
    {"output.weight", "output.weight"},
};
const std::pair<const char*, const char*> kPerLayer[] = {
    {"attention_norm.weight", "attn_norm.weight"},
    {"ffn_norm.weight", "ffn_norm.weight"},
    {"attention.wq.weight", "attn_q.weight"},
    {"attention.wq.bias", "attn_q.bias"},
    {"attention.wk.weight", "attn_k.weight"},
    {"attention.wk.bias", "attn_k.bias"},
    {"attention.wv.weight", "attn_v.weight"},
    {"attention.wv.bias", "attn_v.bias"},
    {"attention.wo.weight", "attn_output.weight"},
    {"attention.wo.bias", "attn_output.bias"},
    {"attention.q_norm.weight", "attn_q_norm.weight"},
    {"attention.k_norm.weight", "attn_k_norm.weight"},
    {"feed_forward.w1.weight", "ffn_gate.weight"},
    {"feed_forward.w1.bias", "ffn_gate.bias"},
    {"feed_forward.w2.weight", "ffn_down.weight"},
    {"feed_forward.w2.bias", "ffn_down.bias"},
    {"feed_forward.w3.weight", "ffn_up.weight"},
    {"feed_forward.w3.bias", "ffn_up.bias"},
    {"moe.router.gate.weight", "ffn_gate_inp.weight"},
    {"moe.experts.w1", "ffn_gate_exps.weight"},
    {"moe.experts.w2", "ffn_down_exps.weight"},
    {"moe.experts.w3", "ffn_up_exps.weight"},
};

// llama.cpp's name for a GGUF architecture, from an HF one.
std::string gguf_arch_of(const std::string& hf_arch) {
  if (hf_arch == "Qwen3ForCausalLM") return "qwen3";
  if (hf_arch == "Qwen3MoeForCausalLM") return "qwen3moe";
  if (hf_arch == "LlamaForCausalLM" || hf_arch == "MistralForCausalLM") return "llama";
  if (hf_arch == "Qwen2ForCausalLM") return "qwen2";
  return "";
}

// The pre-tokenizers titan rebuilds, by llama.cpp's name (llama-vocab.cpp's regexes, which are the
// tokenizer.json Split patterns of those models).
struct PreTokenizer {
  const char* name;
  const char* regex;
  bool nfc;            // the model's tokenizer.json normalizes to NFC (Qwen)
  bool ignore_merges;  // BPE's ignore_merges (Llama 3)
};
const PreTokenizer kPreTokenizers[] = {
    {"qwen2",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     true, false},
    {"llama-bpe",
     R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     false, true},
};

// GGUF token types (llama.h's llama_token_type).
constexpr int kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6;

bool is_layer_name(const std::string& name, const std::string& prefix, int64_t* layer, std::string* rest) {
  if (!name.starts_with(prefix)) return false;
  size_t i = prefix.size();
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == prefix.size() || i >= name.size() || name[i] != '.') return false;
  *layer = std::stoll(name.substr(prefix.size(), i - prefix.size()));
  *rest = name.substr(i + 1);
  return true;
}

// A titan parameter's GGUF name ("" for none).
std::string gguf_name_of(const std::string& fqn) {
  for (const auto& [ours, theirs] : kTopLevel) {
    if (fqn == ours) return theirs;
  }
  int64_t layer = 0;
  std::string rest;
  if (is_layer_name(fqn, "layers.", &layer, &rest)) {
    for (const auto& [ours, theirs] : kPerLayer) {
      if (rest == ours) return "blk." + std::to_string(layer) + "." + theirs;
    }
  }
  return "";
}

// A GGUF name's titan parameter ("" for none).
std::string fqn_of(const std::string& gguf_name) {
  for (const auto& [ours, theirs] : kTopLevel) {
    if (gguf_name == theirs) return ours;
  }
  int64_t layer = 0;
  std::string rest;
  if (is_layer_name(gguf_name, "blk.", &layer, &rest)) {
    for (const auto& [ours, theirs] : kPerLayer) {
      if (rest == theirs) return "layers." + std::to_string(layer) + "." + ours;
    }
  }
  return "";
}

// The shortest decimal that reads back as the same f32 (what a config.json would have said):
// GGUF stores 1e-06 as the f32 nearest it, 9.99999997e-07 as a double.
double f32_decimal(double v) {
  const float f = static_cast<float>(v);
  for (int digits = 1; digits <= 9; ++digits) {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(f));
    const double d = std::strtod(buf, nullptr);
    if (static_cast<float>(d) == f) return d;
  }
  return static_cast<double>(f);
}

// Llama 3's per-frequency RoPE factors as llama.cpp's converter computes them (LlamaModel's
// generate_extra_tensors, torch float32 arithmetic, the thresholds compared in float32).
std::vector<float> llama3_rope_factors(const nn::DecoderConfig& c) {
  const ops::RopeScaling& s = c.rope_scaling;
  const int64_t dim = c.head_dim;
  const float base = c.rope_theta;
  const auto old_len = static_cast<float>(s.original_max_position_embeddings);
  const auto low_wavelen = static_cast<float>(s.original_max_position_embeddings / s.low_freq_factor);
  const auto high_wavelen = static_cast<float>(s.original_max_position_embeddings / s.high_freq_factor);
  std::vector<float> out;
  for (int64_t i = 0; i < dim; i += 2) {
    const float freq = 1.0f / std::pow(base, static_cast<float>(i) / static_cast<float>(dim));
    const float wavelen = static_cast<float>(2.0 * M_PI) / freq;
    if (wavelen < high_wavelen) {
      out.push_back(1.0f);
    } else if (wavelen > low_wavelen) {
      out.push_back(static_cast<float>(s.factor));
    } else {
      const float smooth = (old_len / wavelen - static_cast<float>(s.low_freq_factor)) /
                           static_cast<float>(s.high_freq_factor - s.low_freq_factor);
      out.push_back(1.0f / ((1.0f - smooth) / static_cast<float>(s.factor) + smooth));
    }
  }
  return out;
}

// Rows of a [heads * head_dim, ...] q or k projection between HF's half-split RoPE order and
// llama.cpp's interleaved one (its converter's permute): within a head, HF row s * hd/2 + i is
// GGUF row 2 i + s. `to_gguf` picks the direction.
void permute_rows(const uint8_t* src, uint8_t* dst, int64_t rows, uint64_t row_bytes, int64_t heads, bool to_gguf) {
  const int64_t hd = rows / heads;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t s = 0; s < 2; ++s) {
      for (int64_t i = 0; i < hd / 2; ++i) {
        const int64_t hf = h * hd + s * (hd / 2) + i, gg = h * hd + 2 * i + s;
        const int64_t from = to_gguf ? hf : gg, to = to_gguf ? gg : hf;
        std::memcpy(dst + to * row_bytes, src + from * row_bytes, row_bytes);
      }
    }
  }
}

// ---- export -------------------------------------------------------------------------------------

// convert_hf_to_gguf's does_token_look_special.
bool looks_special(const std::string& t) {
  return t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]" ||
         (t.starts_with("<|") && t.ends_with("|>")) ||
         (t.starts_with("<\xef\xbd\x9c") && t.ends_with("\xef\xbd\x9c>")) || t.starts_with("<start_of_") ||
         t.starts_with("<end_of_");
}

std::string pre_tokenizer_regex(const nlohmann::json& tok) {
  const nlohmann::json& pre = tok.value("pre_tokenizer", nlohmann::json());
  auto split_regex = [](const nlohmann::json& p) -> std::string {
    if (p.is_object() && p.value("type", "") == "Split" && p.contains("pattern") && p["pattern"].contains("Regex")) {
      return p["pattern"]["Regex"].get<std::string>();
    }
    return "";
  };
  if (pre.is_object() && pre.value("type", "") == "Sequence") {
    for (const nlohmann::json& p : pre["pretokenizers"]) {
      if (const std::string r = split_regex(p); !r.empty()) return r;
    }
  }
  return split_regex(pre);
}

void add_tokenizer(ckpt::GgufWriter& w, const std::string& dir, const nn::DecoderConfig& config) {
  const fs::path d(dir);
  TITAN_CHECK(!dir.empty() && fs::is_regular_file(d / "tokenizer.json"), "[gguf export] no tokenizer.json in '", dir,
              "': a GGUF carries its tokenizer. HINT: pass the model folder's tokenizer (--tokenizer DIR, or the "
              "run's model.hf_assets_path)");
  const std::string tok_path = (d / "tokenizer.json").string();
  const nlohmann::json tok = ckpt::read_json_file(tok_path);
  const nlohmann::json& model = tok["model"];
  TITAN_CHECK(model.is_object() && model.value("type", "") == "BPE" && model.contains("vocab") &&
                  !model.value("byte_fallback", false),
              "[gguf export] ", tok_path, ": only byte-level BPE tokenizers (Qwen, Llama 3) are written to GGUF yet. "
              "HINT: export an HF folder (--to-hf) and convert it with llama.cpp's convert_hf_to_gguf.py");
  const std::string regex = pre_tokenizer_regex(tok);
  const PreTokenizer* pre = nullptr;
  for (const PreTokenizer& p : kPreTokenizers) {
    if (regex == p.regex) pre = &p;
  }
  TITAN_CHECK(pre != nullptr, "[gguf export] ", tok_path, ": its pre-tokenizer regex is not one llama.cpp names (qwen2, "
              "llama-bpe). HINT: export an HF folder (--to-hf) and convert it with llama.cpp's convert_hf_to_gguf.py");

  std::map<int64_t, std::string> by_id;
  for (const auto& [text, id] : model["vocab"].items()) by_id[id.get<int64_t>()] = text;
  std::map<int64_t, nlohmann::json> added;
  for (const nlohmann::json& a : tok.value("added_tokens", nlohmann::json::array())) {
    added[a["id"].get<int64_t>()] = a;
    by_id[a["id"].get<int64_t>()] = a["content"].get<std::string>();
  }
  std::vector<GgufValue> tokens, types;
  for (int64_t i = 0; i < config.vocab_size; ++i) {
    const auto it = by_id.find(i);
    if (it == by_id.end()) {
      tokens.push_back(GgufValue::of_string("[PAD" + std::to_string(i) + "]"));
      types.push_back(GgufValue::of_i32(kUnused));
      continue;
    }
    int type = kNormal;
    if (const auto a = added.find(i); a != added.end()) {
      type = a->second.value("special", false) || looks_special(it->second) ? kControl : kUserDefined;
    }
    tokens.push_back(GgufValue::of_string(it->second));
    types.push_back(GgufValue::of_i32(type));
  }
  // Merges as "a b"; a space inside a part (the list layout allows one) becomes U+0120, as gguf writes it.
  auto part = [](std::string p) {
    for (size_t at = p.find(' '); at != std::string::npos; at = p.find(' ', at + 2)) p.replace(at, 1, "\xc4\xa0");
    return p;
  };
  std::vector<GgufValue> merges;
  for (const nlohmann::json& m : model.value("merges", nlohmann::json::array())) {
    merges.push_back(GgufValue::of_string(m.is_array() ? part(m[0].get<std::string>()) + " " + part(m[1].get<std::string>())
                                                        : m.get<std::string>()));
  }
  w.add("tokenizer.ggml.model", GgufValue::of_string("gpt2"));
  w.add("tokenizer.ggml.pre", GgufValue::of_string(pre->name));
  w.add("tokenizer.ggml.tokens", GgufValue::array_of(GgufKind::string, std::move(tokens)));
  w.add("tokenizer.ggml.token_type", GgufValue::array_of(GgufKind::i32, std::move(types)));
  w.add("tokenizer.ggml.merges", GgufValue::array_of(GgufKind::string, std::move(merges)));

  // Special ids as gguf's SpecialVocab finds them: tokenizer_config.json's <kind>_token (a string
  // or {content}) by added token, then config.json's <kind>_token_id.
  nlohmann::json tc = nlohmann::json::object();
  if (fs::is_regular_file(d / "tokenizer_config.json")) tc = ckpt::read_json_file((d / "tokenizer_config.json").string());
  nlohmann::json cj = nlohmann::json::object();
  if (fs::is_regular_file(d / "config.json")) cj = ckpt::read_json_file((d / "config.json").string());
  const std::pair<const char*, const char*> kinds[] = {{"bos", "bos_token_id"}, {"eos", "eos_token_id"},
                                                       {"unk", "unknown_token_id"}, {"sep", "seperator_token_id"},
                                                       {"pad", "padding_token_id"}, {"cls", "cls_token_id"},
                                                       {"mask", "mask_token_id"}};
  // In SpecialVocab's order: the kinds tokenizer_config.json names, then config.json's ids.
  std::map<std::string, int64_t> found;
  auto set = [&](const char* kind, const char* key, int64_t id) {
    if (found.count(kind) || id < 0 || id >= config.vocab_size) return;
    found[kind] = id;
    w.add(std::string("tokenizer.ggml.") + key, GgufValue::of_u32(static_cast<uint32_t>(id)));
  };
  for (const auto& [kind, key] : kinds) {
    const std::string field = std::string(kind) + "_token";
    if (!tc.is_object() || !tc.contains(field)) continue;
    const nlohmann::json& v = tc[field];
    const std::string content = v.is_string() ? v.get<std::string>()
                                : v.is_object() ? v.value("content", std::string()) : std::string();
    for (const nlohmann::json& a : tok.value("added_tokens", nlohmann::json::array())) {
      if (!content.empty() && a["content"] == content) {
        set(kind, key, a["id"].get<int64_t>());
        break;
      }
    }
  }
  for (const auto& [kind, key] : kinds) {
    const std::string id_field = std::string(kind) + "_token_id";
    if (cj.is_object() && cj.contains(id_field) && cj[id_field].is_number_integer()) set(kind, key, cj[id_field].get<int64_t>());
  }
  // add_bos/eos/sep_token as SpecialVocab decides them: tokenizer.json's post-processor first (a
  // ByteLevel one adds neither; a TemplateProcessing adds the special tokens it starts / ends
  // with; Roberta's adds all three), then tokenizer_config.json's add_<kind>_token for the rest.
  std::map<std::string, bool> add;
  const nlohmann::json& post = tok.value("post_processor", nlohmann::json());
  const nlohmann::json processors = post.is_object() && post.contains("processors") ? post["processors"]
                                    : post.is_object() ? nlohmann::json::array({post}) : nlohmann::json::array();
  auto token_of = [&](const char* field) {
    const nlohmann::json v = tc.is_object() ? tc.value(field, nlohmann::json()) : nlohmann::json();
    return v.is_string() ? v.get<std::string>() : v.is_object() ? v.value("content", std::string()) : std::string();
  };
  for (const nlohmann::json& pp : processors) {
    const std::string type = pp.value("type", "");
    if (type == "ByteLevel") {
      add.emplace("bos", false);
      add.emplace("eos", false);
    } else if (type == "RobertaProcessing") {
      add["bos"] = add["eos"] = add["sep"] = true;
    } else if (type == "TemplateProcessing") {
      const nlohmann::json single = pp.value("single", nlohmann::json::array());
      if (single.size() > 1) {
        const std::string first = single.front().value("SpecialToken", nlohmann::json::object()).value("id", "");
        const std::string last = single.back().value("SpecialToken", nlohmann::json::object()).value("id", "");
        if (!first.empty()) add["bos"] = first == token_of("bos_token") || first == token_of("cls_token");
        if (!last.empty()) add["eos"] = last == token_of("eos_token");
      }
    }
  }
  for (const char* kind : {"bos", "eos", "sep"}) {
    const std::string field = std::string("add_") + kind + "_token";
    if (tc.is_object() && tc.contains(field) && tc[field].is_boolean()) add.emplace(kind, tc[field].get<bool>());
  }
  for (const char* kind : {"bos", "eos", "sep"}) {
    if (add.count(kind)) w.add(std::string("tokenizer.ggml.add_") + kind + "_token", GgufValue::of_bool(add[kind]));
  }
  // The chat template: tokenizer_config.json's, else chat_template.jinja's.
  std::string chat_template;
  if (tc.is_object() && tc.contains("chat_template") && tc["chat_template"].is_string()) {
    chat_template = tc["chat_template"].get<std::string>();
  } else if (fs::is_regular_file(d / "chat_template.jinja")) {
    chat_template = ckpt::read_file_bytes((d / "chat_template.jinja").string());
  }
  if (!chat_template.empty()) w.add("tokenizer.chat_template", GgufValue::of_string(chat_template));
}

struct ExportTensor {
  std::string fqn;   // titan's parameter ("" for an extra tensor: rope_freqs)
  std::string name;
  std::vector<int64_t> ne;
  Shape shape;       // titan's (ne reversed)
  // The value when it is written (f32 or bf16, titan's layout: the GGUF row order but for
  // permute), so one merged weight at a time exists.
  std::function<Tensor()> value;
  int64_t permute_heads = 0;
};

// gguf's model_weight_count_rounded_notation: "205K", "1.5B" (at least two significant digits).
std::string rounded_count(double n) {
  const char* suffix = n > 1e12 ? "T" : n > 1e9 ? "B" : n > 1e6 ? "M" : "K";
  const double scaled = n * (n > 1e12 ? 1e-12 : n > 1e9 ? 1e-9 : n > 1e6 ? 1e-6 : 1e-3);
  std::string whole = std::to_string(static_cast<int64_t>(std::nearbyint(scaled)));  // Python's round: half even
  whole.erase(0, whole.find_first_not_of('0') == std::string::npos ? whole.size() : whole.find_first_not_of('0'));
  const int fix = std::max(2 - static_cast<int>(whole.size()), 0);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f%s", fix, scaled, suffix);
  return buf;
}

// general.size_label as gguf's GGUFWriter counts it: every tensor's elements, and for a mixture of
// experts "<experts>x<shared + one expert's>" (an *_exps tensor counts once per expert).
std::string size_label(const std::vector<ExportTensor>& tensors) {
  int64_t total = 0, shared = 0, expert = 0, expert_sum = 0, expert_tensors = 0;
  for (const ExportTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    total += n;
    if (t.name.find("_exps.") != std::string::npos && t.ne.size() >= 3) {
      const int64_t e = t.ne[2];
      expert += n / e;
      expert_sum += e;
      ++expert_tensors;
    } else {
      shared += n;
    }
  }
  if (expert_tensors > 0) {
    return std::to_string(expert_sum / expert_tensors) + "x" + rounded_count(static_cast<double>(shared + expert));
  }
  return rounded_count(static_cast<double>(total));
}

}  // namespace

void save_gguf(const nn::Decoder& model, const std::string& out_path, const GgufExportOptions& options) {
  const nn::DecoderConfig& c = model.config();
  const std::string hf_arch = options.architecture.empty() ? default_hf_architecture(c) : options.architecture;
  const std::string arch = gguf_arch_of(hf_arch);
  TITAN_CHECK(!arch.empty(), "[gguf export] architecture ", hf_arch, " has no GGUF layout in titan (qwen3, qwen3moe, "
              "llama, qwen2 do). HINT: export an HF folder (--to-hf) instead");
  TITAN_CHECK(c.layer_types.empty() && !c.attn_output_gate && c.shared_expert_dim == 0 && c.partial_rotary_factor == 1.0f,
              "[gguf export] this model's layers (Qwen3.5's DeltaNet / gated attention / shared expert) have no GGUF "
              "layout in titan yet. HINT: export an HF folder (--to-hf) instead");
  TITAN_CHECK(c.rope_scaling.type == ops::RopeType::default_ || c.rope_scaling.type == ops::RopeType::linear ||
                  c.rope_scaling.type == ops::RopeType::yarn || (arch == "llama" && c.rope_scaling.type == ops::RopeType::llama3),
              "[gguf export] RoPE scaling ", ops::rope_type_name(c.rope_scaling.type), " has no GGUF form for ", arch,
              ". HINT: export an HF folder (--to-hf) instead");
  GgmlType type = GgmlType::f32;
  TITAN_CHECK(options.dtype == "f32" || options.dtype == "f16" || options.dtype == "bf16" || options.dtype == "q8_0",
              "[gguf export] dtype '", options.dtype, "' is not f32, f16, bf16 or q8_0");
  parse_ggml_type(options.dtype, &type);
  std::error_code ec;
  if (fs::exists(out_path, ec)) {
    TITAN_CHECK(fs::is_regular_file(out_path, ec) && !fs::is_symlink(out_path, ec), "[gguf export] ", out_path,
                " exists and is not a regular file; refusing to replace it. HINT: choose another output path");
    TITAN_CHECK(options.overwrite || (options.replace_gguf && ckpt::is_gguf_file(out_path)), "[gguf export] ", out_path,
                " exists; refusing to replace a file titan did not just write. HINT: choose another output path, or "
                "pass --overwrite to replace it");
  }

  ckpt::GgufWriter w;
  const std::string name = options.name.empty() ? fs::path(out_path).stem().string() : options.name;
  const int file_type = type == GgmlType::f32 ? 0 : type == GgmlType::f16 ? 1 : type == GgmlType::q8_0 ? 7 : 32;
  w.add("general.architecture", GgufValue::of_string(arch));
  w.add("general.type", GgufValue::of_string("model"));
  w.add("general.name", GgufValue::of_string(name));
  w.add("general.size_label", GgufValue::of_string(""));  // set below, once the tensors are known
  const std::string p = arch + ".";
  w.add(p + "block_count", GgufValue::of_u32(static_cast<uint32_t>(c.num_layers)));
  w.add(p + "context_length", GgufValue::of_u32(static_cast<uint32_t>(c.max_seq_len)));
  w.add(p + "embedding_length", GgufValue::of_u32(static_cast<uint32_t>(c.dim)));
  w.add(p + "feed_forward_length", GgufValue::of_u32(static_cast<uint32_t>(c.hidden_dim)));
  w.add(p + "attention.head_count", GgufValue::of_u32(static_cast<uint32_t>(c.num_heads)));
  w.add(p + "attention.head_count_kv", GgufValue::of_u32(static_cast<uint32_t>(c.num_kv_heads)));
  w.add(p + "rope.freq_base", GgufValue::of_f32(c.rope_theta));
  w.add(p + "attention.layer_norm_rms_epsilon", GgufValue::of_f32(c.norm_eps));
  // The converter writes the head size when config.json states head_dim (a Qwen2 folder's does not).
  nlohmann::json source_config = config_to_hf(c, hf_arch, "float32");
  if (!options.source_dir.empty() && fs::is_regular_file(fs::path(options.source_dir) / "config.json")) {
    source_config = ckpt::read_json_file((fs::path(options.source_dir) / "config.json").string());
  }
  if (source_config.contains("head_dim") || c.head_dim * c.num_heads != c.dim) {
    w.add(p + "attention.key_length", GgufValue::of_u32(static_cast<uint32_t>(c.head_dim)));
    w.add(p + "attention.value_length", GgufValue::of_u32(static_cast<uint32_t>(c.head_dim)));
  }
  if (arch == "llama") {
    w.add(p + "vocab_size", GgufValue::of_u32(static_cast<uint32_t>(c.vocab_size)));
    w.add(p + "rope.dimension_count", GgufValue::of_u32(static_cast<uint32_t>(c.head_dim)));
  }
  if (c.rope_scaling.type == ops::RopeType::linear || c.rope_scaling.type == ops::RopeType::yarn) {
    w.add(p + "rope.scaling.type", GgufValue::of_string(ops::rope_type_name(c.rope_scaling.type)));
    w.add(p + "rope.scaling.factor", GgufValue::of_f32(static_cast<float>(c.rope_scaling.factor)));
    if (c.rope_scaling.type == ops::RopeType::yarn) {
      w.add(p + "rope.scaling.original_context_length",
            GgufValue::of_u32(static_cast<uint32_t>(c.rope_scaling.original_max_position_embeddings)));
    }
  }
  if (c.num_experts > 0) {
    TITAN_CHECK(c.decoder_sparse_step == 1 && c.mlp_only_layers.empty(), "[gguf export] llama.cpp's qwen3moe has "
                "every layer sparse; this model has dense layers (decoder_sparse_step / mlp_only_layers). HINT: export "
                "an HF folder (--to-hf) instead");
    w.add(p + "expert_count", GgufValue::of_u32(static_cast<uint32_t>(c.num_experts)));
    w.add(p + "expert_used_count", GgufValue::of_u32(static_cast<uint32_t>(c.num_experts_per_tok)));
    w.add(p + "expert_feed_forward_length", GgufValue::of_u32(static_cast<uint32_t>(c.moe_hidden_dim)));
  }
  w.add("general.file_type", GgufValue::of_u32(static_cast<uint32_t>(file_type)));
  w.add("general.quantization_version", GgufValue::of_u32(2));
  add_tokenizer(w, options.tokenizer_dir, c);

  // Tensors: each parameter (adapters merged) under its llama.cpp name, dims reversed.
  std::vector<ExportTensor> tensors;
  auto merged = std::make_shared<nn::MergedWeights>(const_cast<nn::Decoder&>(model));
  for (const nn::Parameter* p : merged->parameters()) {
    const std::string gname = gguf_name_of(p->fqn);
    TITAN_CHECK(!gname.empty(), "[gguf export] parameter ", p->fqn, " has no GGUF name in titan's table");
    ExportTensor t{p->fqn, gname, {}, p->shape(), [merged, p] { return merged->get(*p); }, 0};
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) t.ne.push_back(*d);
    const std::string& fqn = p->fqn;
    if (arch == "llama" && (fqn.ends_with("attention.wq.weight") || fqn.ends_with("attention.wq.bias"))) t.permute_heads = c.num_heads;
    if (arch == "llama" && (fqn.ends_with("attention.wk.weight") || fqn.ends_with("attention.wk.bias"))) t.permute_heads = c.num_kv_heads;
    tensors.push_back(std::move(t));
  }
  if (c.rope_scaling.type == ops::RopeType::llama3) {
    const std::vector<float> f = llama3_rope_factors(c);
    Tensor t = Tensor::empty({static_cast<int64_t>(f.size())});
    std::memcpy(t.data<float>(), f.data(), f.size() * 4);
    tensors.push_back({"", "rope_freqs.weight", {static_cast<int64_t>(f.size())}, t.shape(), [t] { return t; }, 0});
  }
  w.add("general.size_label", GgufValue::of_string(size_label(tensors)));
  // The converter's order: its extra tensors (rope_freqs) first, then the folder's tensors by HF
  // name (a safetensors file's order); a stacked experts tensor where its first expert sorts.
  auto hf_key = [](const ExportTensor& t) {
    if (t.fqn.empty()) return std::string();
    return to_hf_tensors(t.fqn, Tensor::empty(t.shape, DType::f32, Device::meta)).front().first;
  };
  std::stable_sort(tensors.begin(), tensors.end(),
                   [&](const ExportTensor& a, const ExportTensor& b) { return hf_key(a) < hf_key(b); });
  for (ExportTensor& t : tensors) {
    // The converter's rule: 1-D tensors, norms and the MoE router stay f32; a row that is not
    // whole q8_0 blocks falls back to f16.
    GgmlType tt = type;
    if (t.ne.size() <= 1 || t.name.ends_with("_norm.weight") || t.name.ends_with("ffn_gate_inp.weight")) tt = GgmlType::f32;
    if (tt == GgmlType::q8_0 && t.ne[0] % 32 != 0) tt = GgmlType::f16;
    w.add_tensor(t.name, tt, t.ne, [t, tt](std::string& bytes) {
      const Tensor value = t.value().to(DType::f32).contiguous();  // this tensor's copy only
      const int64_t n = value.numel(), row = t.ne[0], rows = n / row;
      const float* x = value.data<float>();
      std::vector<float> permuted;
      if (t.permute_heads > 0) {
        permuted.resize(static_cast<size_t>(n));
        permute_rows(reinterpret_cast<const uint8_t*>(x), reinterpret_cast<uint8_t*>(permuted.data()),
                     t.ne.size() == 1 ? n : rows, static_cast<uint64_t>(t.ne.size() == 1 ? 1 : row) * 4,
                     t.permute_heads, true);
        x = permuted.data();
      }
      const GgmlTypeInfo& info = ggml_type_info(tt);
      bytes.resize(ggml_row_bytes(info, row) * static_cast<uint64_t>(rows));
      auto* out = reinterpret_cast<uint8_t*>(bytes.data());
      for (int64_t i = 0; i < n; ++i) {
        if (tt == GgmlType::f32) {
          std::memcpy(out + 4 * i, x + i, 4);
        } else if (tt == GgmlType::f16) {
          const uint16_t h = f32_to_f16(x[i]);
          std::memcpy(out + 2 * i, &h, 2);
        } else if (tt == GgmlType::bf16) {
          const uint16_t h = f32_to_bf16(x[i]);
          std::memcpy(out + 2 * i, &h, 2);
        }
      }
      if (tt == GgmlType::q8_0) ggml_quantize_q8_0(x, out, n);
    });
  }
  w.write(out_path);
  log_info(str("[gguf export] wrote ", out_path, " (", arch, ", ", options.dtype, ")"));
}

// ---- import -------------------------------------------------------------------------------------

std::shared_ptr<const GgufModel> GgufModel::open(const std::string& path) {
  auto m = std::make_shared<GgufModel>();
  m->file_ = ckpt::GgufFile::open(path);
  const ckpt::GgufFile& f = m->file_;
  m->arch_ = f.get_string("general.architecture");
  const std::string& arch = m->arch_;
  std::string hf_arch;
  if (arch == "qwen3") hf_arch = "Qwen3ForCausalLM";
  if (arch == "qwen3moe") hf_arch = "Qwen3MoeForCausalLM";
  if (arch == "llama") hf_arch = "LlamaForCausalLM";
  if (arch == "qwen2") hf_arch = "Qwen2ForCausalLM";
  TITAN_CHECK(!hf_arch.empty(), "[gguf] ", path, ": architecture '", arch, "' is not one titan reads from GGUF "
              "(qwen3, qwen3moe, llama, qwen2). HINT: load the model's Hugging Face folder instead");
  const std::string p = arch + ".";
  auto u = [&](const std::string& key) {
    const int64_t v = f.get_int(p + key);
    TITAN_CHECK(v > 0 && v < (int64_t{1} << 31), "[gguf] ", path, ": ", p, key, " = ", v,
                " is not a size. HINT: the file is damaged");
    return v;
  };
  const std::string vocab_key = "tokenizer.ggml.tokens";
  const ckpt::GgufValue& tokens = f.get(vocab_key);
  TITAN_CHECK(tokens.kind == GgufKind::array && tokens.elem == GgufKind::string && !tokens.items.empty(), "[gguf] ",
              path, ": ", vocab_key, " is not a list of strings. HINT: the file is damaged");
  const int64_t vocab = f.has(p + "vocab_size") ? u("vocab_size") : static_cast<int64_t>(tokens.items.size());
  const int64_t dim = u("embedding_length"), heads = u("attention.head_count");
  const int64_t kv_heads = f.has(p + "attention.head_count_kv") ? u("attention.head_count_kv") : heads;
  const int64_t head_dim = f.has(p + "attention.key_length") ? u("attention.key_length") : dim / heads;
  TITAN_CHECK(!f.has(p + "attention.value_length") || u("attention.value_length") == head_dim, "[gguf] ", path,
              ": attention.value_length differs from key_length, which titan's attention does not support");
  if (arch == "llama" && f.has(p + "rope.dimension_count")) {
    TITAN_CHECK(u("rope.dimension_count") == head_dim, "[gguf] ", path, ": ", p, "rope.dimension_count ",
                u("rope.dimension_count"), " is not the head size ", head_dim, " (partial RoPE is not read)");
  }
  const int64_t layers = u("block_count");
  nlohmann::json& c = m->config_;
  c["architectures"] = {hf_arch};
  c["model_type"] = arch == "qwen3moe" ? "qwen3_moe" : arch;
  c["vocab_size"] = vocab;
  c["hidden_size"] = dim;
  c["num_hidden_layers"] = layers;
  c["num_attention_heads"] = heads;
  c["num_key_value_heads"] = kv_heads;
  c["head_dim"] = head_dim;
  c["intermediate_size"] = u("feed_forward_length");
  c["max_position_embeddings"] = u("context_length");
  c["rms_norm_eps"] = f32_decimal(f.get_float(p + "attention.layer_norm_rms_epsilon"));
  c["rope_theta"] = f.has(p + "rope.freq_base") ? f32_decimal(f.get_float(p + "rope.freq_base")) : 10000.0;
  c["hidden_act"] = "silu";
  c["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  c["torch_dtype"] = "float32";
  if (arch == "llama") {
    c["attention_bias"] = f.find_tensor("blk.0.attn_q.bias") != nullptr;
    c["mlp_bias"] = f.find_tensor("blk.0.ffn_gate.bias") != nullptr;
  }
  if (arch == "qwen3" || arch == "qwen3moe") c["attention_bias"] = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  if (arch == "qwen3moe") {
    c["num_experts"] = u("expert_count");
    c["num_experts_per_tok"] = u("expert_used_count");
    c["moe_intermediate_size"] = u("expert_feed_forward_length");
    c["norm_topk_prob"] = true;
    c["decoder_sparse_step"] = 1;
    c["mlp_only_layers"] = nlohmann::json::array();
  }
  if (f.has(p + "rope.scaling.type") && f.get_string(p + "rope.scaling.type") != "none") {
    const std::string type = f.get_string(p + "rope.scaling.type");
    TITAN_CHECK(type == "linear" || type == "yarn", "[gguf] ", path, ": ", p, "rope.scaling.type '", type,
                "' is not read (linear, yarn are). HINT: load the model's Hugging Face folder instead");
    nlohmann::json rs = {{"rope_type", type}, {"factor", f32_decimal(f.get_float(p + "rope.scaling.factor"))}};
    if (type == "yarn") rs["original_max_position_embeddings"] = f.get_int(p + "rope.scaling.original_context_length");
    c["rope_scaling"] = rs;
  }
  if (const ckpt::GgufTensorInfo* rf = f.find_tensor("rope_freqs.weight")) {
    // Llama 3 scaling: the factors llama.cpp applies per frequency. Transformers describes them by
    // four numbers; titan takes Llama 3's published ones and checks they give these factors.
    TITAN_CHECK(arch == "llama" && rf->type == GgmlType::f32 && rf->numel() == head_dim / 2, "[gguf] ", path,
                ": rope_freqs.weight is not ", head_dim / 2, " f32 values of a llama model");
    std::vector<float> stored(static_cast<size_t>(head_dim / 2));
    std::memcpy(stored.data(), f.data(*rf), stored.size() * 4);
    nn::DecoderConfig probe;
    probe.head_dim = head_dim;
    probe.rope_theta = static_cast<float>(c["rope_theta"].get<double>());
    probe.rope_scaling.type = ops::RopeType::llama3;
    bool matched = false;
    for (const double factor : {8.0, 32.0, 16.0, 4.0, 2.0}) {
      for (const double original : {8192.0, 4096.0, 2048.0, 16384.0, 32768.0}) {
        probe.rope_scaling.factor = factor;
        probe.rope_scaling.original_max_position_embeddings = original;
        probe.rope_scaling.low_freq_factor = 1.0;
        probe.rope_scaling.high_freq_factor = 4.0;
        if (!matched && llama3_rope_factors(probe) == stored) {
          matched = true;
          c["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", factor}, {"low_freq_factor", 1.0},
                               {"high_freq_factor", 4.0}, {"original_max_position_embeddings", static_cast<int64_t>(original)}};
        }
      }
    }
    if (!matched) {
      // Other parameters: the factors themselves, as LongRoPE states per-frequency factors
      // (inv_freq / f, attention scale 1), which Transformers and titan read.
      nlohmann::json factors = nlohmann::json::array();
      for (const float v : stored) factors.push_back(static_cast<double>(v));
      c["rope_scaling"] = {{"rope_type", "longrope"}, {"long_factor", factors}, {"short_factor", factors},
                           {"attention_factor", 1.0}, {"original_max_position_embeddings", c["max_position_embeddings"]}};
    }
  }
  // Special ids, each a token of the file's list (a damaged file names the key).
  auto special = [&](const char* key) -> int64_t {
    if (!f.has(key)) return -1;
    const int64_t id = f.get_int(key);
    TITAN_CHECK(id >= 0 && id < static_cast<int64_t>(tokens.items.size()), "[gguf] ", path, ": ", key, " = ", id,
                " is not one of the file's ", tokens.items.size(), " tokens. HINT: the file is damaged");
    return id;
  };
  const int64_t eos = special("tokenizer.ggml.eos_token_id");
  const int64_t bos = special("tokenizer.ggml.bos_token_id");
  const int64_t pad = special("tokenizer.ggml.padding_token_id");
  const int64_t eot = special("tokenizer.ggml.eot_token_id");
  c["bos_token_id"] = bos >= 0 ? nlohmann::json(bos) : nlohmann::json();
  c["eos_token_id"] = eos >= 0 ? nlohmann::json(eos) : nlohmann::json();
  c["pad_token_id"] = pad >= 0 ? nlohmann::json(pad) : nlohmann::json();
  config_from_hf(c, path);  // what the folder's config.json would be checked for

  // The tokenizer.
  const std::string tok_model = f.get_string("tokenizer.ggml.model");
  TITAN_CHECK(tok_model == "gpt2", "[gguf] ", path, ": tokenizer.ggml.model '", tok_model, "' is not rebuilt by titan "
              "(gpt2, byte-level BPE, is). HINT: pass the model's tokenizer.json folder as --model.hf_assets_path");
  const std::string pre_name = f.has("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre") : "default";
  const PreTokenizer* pre = nullptr;
  for (const PreTokenizer& x : kPreTokenizers) {
    if (pre_name == x.name) pre = &x;
  }
  TITAN_CHECK(pre != nullptr, "[gguf] ", path, ": tokenizer.ggml.pre '", pre_name, "' is not rebuilt by titan (qwen2, "
              "llama-bpe are). HINT: pass the model's tokenizer.json folder as --model.hf_assets_path");
  const ckpt::GgufValue* types = f.find("tokenizer.ggml.token_type");
  TITAN_CHECK(types == nullptr || (types->kind == GgufKind::array && types->items.size() == tokens.items.size() &&
                                   types->elem != GgufKind::string && types->elem != GgufKind::f32 &&
                                   types->elem != GgufKind::f64),
              "[gguf] ", path, ": tokenizer.ggml.token_type does not give one integer per token");
  const ckpt::GgufValue& merges = f.get("tokenizer.ggml.merges");
  TITAN_CHECK(merges.kind == GgufKind::array && merges.elem == GgufKind::string, "[gguf] ", path,
              ": tokenizer.ggml.merges is not a list of strings");
  nlohmann::json vocab_json = nlohmann::json::object(), added = nlohmann::json::array();
  for (size_t i = 0; i < tokens.items.size(); ++i) {
    const int type = types == nullptr ? kNormal : static_cast<int>(types->items[i].i);
    const std::string& text = tokens.items[i].s;
    if (type == kUnused) continue;
    if (type == kControl || type == kUserDefined) {
      added.push_back({{"id", i}, {"content", text}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                       {"normalized", false}, {"special", type == kControl}});
    } else {
      TITAN_CHECK(type == kNormal || type == kByte, "[gguf] ", path, ": token ", i, " has type ", type,
                  ", which a byte-level BPE vocabulary does not hold");
      vocab_json[text] = i;
    }
  }
  nlohmann::json merge_list = nlohmann::json::array();
  for (const ckpt::GgufValue& mv : merges.items) {
    const size_t space = mv.s.find(' ', 1);
    TITAN_CHECK(space != std::string::npos, "[gguf] ", path, ": merge '", mv.s, "' is not two tokens");
    merge_list.push_back({mv.s.substr(0, space), mv.s.substr(space + 1)});
  }
  const bool add_bos = f.has("tokenizer.ggml.add_bos_token") && f.get("tokenizer.ggml.add_bos_token").i != 0 && bos >= 0;
  const nlohmann::json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                                     {"use_regex", false}};
  nlohmann::json& t = m->tokenizer_;
  t["version"] = "1.0";
  t["truncation"] = nullptr;
  t["padding"] = nullptr;
  t["added_tokens"] = added;
  t["normalizer"] = pre->nfc ? nlohmann::json{{"type", "NFC"}} : nlohmann::json();
  t["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", pre->regex}}}, {"behavior", "Isolated"}, {"invert", false}},
                          byte_level}}};
  t["post_processor"] = byte_level;
  if (add_bos) {
    const std::string b = tokens.items[static_cast<size_t>(bos)].s;
    const nlohmann::json special = {{"SpecialToken", {{"id", b}, {"type_id", 0}}}};
    t["post_processor"] = {
        {"type", "TemplateProcessing"},
        {"single", {special, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", {special, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, special, {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{b, {{"id", b}, {"ids", {bos}}, {"tokens", {b}}}}}}};
  }
  t["decoder"] = byte_level;
  t["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", ""},
                {"end_of_word_suffix", ""}, {"fuse_unk", false}, {"byte_fallback", false},
                {"ignore_merges", pre->ignore_merges}, {"vocab", vocab_json}, {"merges", merge_list}};
  nlohmann::json& tc = m->tokenizer_config_;
  tc = {{"add_bos_token", add_bos}, {"add_eos_token", false}, {"model_max_length", c["max_position_embeddings"]}};
  auto token_text = [&](int64_t id) { return id >= 0 && id < static_cast<int64_t>(tokens.items.size()) ? nlohmann::json(tokens.items[static_cast<size_t>(id)].s) : nlohmann::json(); };
  tc["bos_token"] = token_text(bos);
  tc["eos_token"] = token_text(eos);
  tc["pad_token"] = token_text(pad);
  if (f.has("tokenizer.chat_template")) tc["chat_template"] = f.get_string("tokenizer.chat_template");
  nlohmann::json& g = m->generation_config_;
  std::vector<int64_t> eos_ids;
  if (eos >= 0) eos_ids.push_back(eos);
  if (eot >= 0 && eot != eos) eos_ids.push_back(eot);
  g = {{"bos_token_id", c["bos_token_id"]}, {"pad_token_id", c["pad_token_id"]}};
  g["eos_token_id"] = eos_ids.size() == 1 ? nlohmann::json(eos_ids[0]) : nlohmann::json(eos_ids);
  for (const int64_t id : eos_ids) {
    TITAN_CHECK(id >= 0 && id < vocab, "[gguf] ", path, ": special token id ", id, " is outside the vocabulary of ", vocab);
  }

  // Tensors under their HF names.
  for (const ckpt::GgufTensorInfo& ti : f.tensors()) {
    if (ti.name == "rope_freqs.weight") continue;
    const std::string fqn = fqn_of(ti.name);
    TITAN_CHECK(!fqn.empty(), "[gguf] ", path, ": tensor '", ti.name, "' is not part of a ", arch, " model titan "
                "reads. HINT: the file holds more than the text model (a vision tower?); load the HF folder");
    TITAN_CHECK(ggml_type_info(ti.type).decodable, "[gguf] ", path, ": tensor '", ti.name, "' is ",
                ggml_type_info(ti.type).name, ", which titan does not decode (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, "
                "q5_K, q6_K are). HINT: use a download of another quantization");
    Shape shape(ti.ne.rbegin(), ti.ne.rend());
    const bool experts = fqn.find(".moe.experts.") != std::string::npos;
    int64_t permute = 0;
    if (arch == "llama" && (fqn.ends_with("attention.wq.weight") || fqn.ends_with("attention.wq.bias"))) permute = heads;
    if (arch == "llama" && (fqn.ends_with("attention.wk.weight") || fqn.ends_with("attention.wk.bias"))) permute = kv_heads;
    if (permute > 0) {
      TITAN_CHECK(shape[0] == permute * head_dim && head_dim % 2 == 0, "[gguf] ", path, ": tensor '", ti.name,
                  "' has ", shape[0], " rows, not ", permute, " heads of ", head_dim);
    }
    if (experts) {
      TITAN_CHECK(shape.size() == 3, "[gguf] ", path, ": tensor '", ti.name, "' is not 3-D [experts, rows, cols]");
      Shape one(shape.begin() + 1, shape.end());
      for (const auto& [hf, view] : to_hf_tensors(fqn, Tensor::empty(shape, DType::u8, Device::meta))) {
        (void)view;
        const int64_t e = std::stoll(hf.substr(hf.find(".experts.") + 9));
        m->sources_[hf] = {&ti, e, 0, one};
      }
    } else {
      m->sources_[to_hf_name(fqn)] = {&ti, -1, permute, shape};
    }
  }
  return m;
}

nn::DecoderConfig GgufModel::decoder_config() const { return config_from_hf(config_, path()); }

void GgufModel::write_assets(const std::string& dir) const {
  const fs::path d(dir);
  ckpt::write_text_file_atomic((d / "config.json").string(), config_.dump(2) + "\n");
  ckpt::write_text_file_atomic((d / "tokenizer.json").string(), tokenizer_.dump(2) + "\n");
  ckpt::write_text_file_atomic((d / "tokenizer_config.json").string(), tokenizer_config_.dump(2) + "\n");
  ckpt::write_text_file_atomic((d / "generation_config.json").string(), generation_config_.dump(2) + "\n");
}

std::shared_ptr<void> GgufModel::write_temp_assets(std::string* dir) const {
  std::string pattern = (fs::temp_directory_path() / "titan-gguf-XXXXXX").string();
  TITAN_CHECK(::mkdtemp(pattern.data()) != nullptr, "[gguf] cannot create a temporary folder ", pattern, " for ",
              path(), "'s config and tokenizer: ", std::strerror(errno), ". HINT: set TMPDIR to a writable folder");
  *dir = pattern;
  std::shared_ptr<void> lease(nullptr, [pattern](void*) {
    std::error_code ec;
    fs::remove_all(pattern, ec);
  });
  write_assets(pattern);
  return lease;
}

Tensor GgufModel::read(const std::string& name) const {
  const auto it = sources_.find(name);
  TITAN_CHECK(it != sources_.end(), "[gguf] ", path(), ": no tensor for '", name, "'");
  const Source& s = it->second;
  const ckpt::GgufTensorInfo& ti = *s.tensor;
  const GgmlTypeInfo& info = ggml_type_info(ti.type);
  const int64_t row = ti.ne[0];
  const uint64_t row_bytes = ggml_row_bytes(info, row);
  int64_t rows = ti.rows();
  const uint8_t* src = file_.data(ti);
  if (s.expert >= 0) {
    rows /= ti.ne.back();
    src += static_cast<uint64_t>(s.expert) * static_cast<uint64_t>(rows) * row_bytes;
  }
  std::vector<uint8_t> unpermuted;
  if (s.permute_heads > 0) {
    // A bias is one row of `rows` elements: permute its elements (rows of 1).
    const bool bias = ti.ne.size() == 1;
    TITAN_CHECK(!bias || info.block == 1, "[gguf] ", path(), ": tensor '", ti.name, "' is a quantized bias");
    unpermuted.resize(row_bytes * static_cast<uint64_t>(rows));
    permute_rows(src, unpermuted.data(), bias ? row : rows, bias ? row_bytes / static_cast<uint64_t>(row) : row_bytes,
                 s.permute_heads, false);
    src = unpermuted.data();
  }
  Tensor out = Tensor::empty(s.shape, DType::f32, Device::cpu);
  for (int64_t r = 0; r < rows; ++r) {
    ggml_dequantize_row(ti.type, src + static_cast<uint64_t>(r) * row_bytes, out.data<float>() + r * row, row);
  }
  return out;
}

Tensor GgufModel::read_blocks(const std::string& name, GgmlType* type) const {
  const auto it = sources_.find(name);
  TITAN_CHECK(it != sources_.end(), "[gguf] ", path(), ": no tensor for '", name, "'");
  const Source& s = it->second;
  const ckpt::GgufTensorInfo& ti = *s.tensor;
  TITAN_CHECK(s.shape.size() == 2 && s.expert < 0, "[gguf] ", path(), ": '", name, "' is not a 2-D weight");
  const uint64_t row_bytes = ggml_row_bytes(ggml_type_info(ti.type), ti.ne[0]);
  Tensor out = Tensor::empty({static_cast<int64_t>(row_bytes) * s.shape[0]}, DType::u8, Device::cpu);
  if (s.permute_heads > 0) {
    permute_rows(file_.data(ti), out.data<uint8_t>(), s.shape[0], row_bytes, s.permute_heads, false);
  } else {
    std::memcpy(out.data<uint8_t>(), file_.data(ti), row_bytes * static_cast<uint64_t>(s.shape[0]));
  }
  *type = ti.type;
  return out;
}

GgufWeights::GgufWeights(std::shared_ptr<const GgufModel> model) : model_(std::move(model)) {
  for (const auto& [name, s] : model_->sources()) {
    ckpt::TensorInfo info;
    info.name = name;
    info.dtype = DType::f32;
    info.shape = s.shape;
    infos_[name] = info;
  }
}

std::vector<std::string> GgufWeights::names() const {
  std::vector<std::string> out;
  for (const auto& [name, info] : infos_) out.push_back(name);
  return out;
}

const ckpt::TensorInfo* GgufWeights::find(const std::string& name) const {
  const auto it = infos_.find(name);
  return it == infos_.end() ? nullptr : &it->second;
}

Tensor GgufWeights::get(const std::string& name) const { return model_->read(name); }
std::string GgufWeights::file_of(const std::string&) const { return model_->path(); }
void GgufWeights::release(const std::string& name) const {
  const auto it = model_->sources().find(name);
  if (it != model_->sources().end()) model_->file().release(*it->second.tensor);
}

std::unique_ptr<ckpt::TensorSource> open_weights(const std::string& dir_or_gguf) {
  if (ckpt::is_gguf_file(dir_or_gguf)) return std::make_unique<GgufWeights>(GgufModel::open(dir_or_gguf));
  return std::make_unique<ckpt::HfWeights>(ckpt::HfWeights::open(dir_or_gguf));
}

}  // namespace titan::models
