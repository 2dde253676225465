// GCC 12 at -O1 (the sanitizer build) warns -Wmaybe-uninitialized inside <regex>'s own
// std::function members, a false positive in the library's code that the warning reports at the
// header's lines; this file's one regex (PEFT's target_modules) is why it includes <regex>.
// (Clang, which builds the fuzz targets, has no -Wmaybe-uninitialized.)
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "titan/models/decoder/peft.h"

#include <cctype>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <map>
#include <optional>
#include <regex>
#include <nlohmann/json.hpp>

#include "titan/checkpoint/atomic_file.h"
#include "titan/checkpoint/json_file.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/core/abbreviate.h"
#include "titan/core/log.h"
#include "titan/models/decoder/hf_checkpoint.h"
#include "titan/models/decoder/hf_names.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/weights.h"
#include "titan/nn/decoder.h"
#include "titan/nn/lora.h"
#include "titan/plugins/lora.h"

namespace titan::models {

namespace fs = std::filesystem;

static constexpr const char* kPrefix = "base_model.model.";

// PEFT's names of expert adapters (target_parameters [mlp.experts.gate_up_proj,
// mlp.experts.down_proj]: the first wrapped innermost, under base_layer):
// "base_model.model.model.layers.<i>.mlp.experts.base_layer.lora_A.weight" (gate_up),
// "...mlp.experts.lora_A.weight" (down). Gives ("model.layers.<i>.moe.experts", "gate_up_proj" |
// "down_proj", 'A' | 'B'), or nullopt.
struct ExpertTensor {
  std::string path, param;
  char which;
};
static std::optional<ExpertTensor> expert_adapter(const std::string& name) {
  const std::string head = std::string(kPrefix) + "model.layers.";
  if (!name.starts_with(head)) return std::nullopt;
  size_t at = head.size(), end = at;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
  if (end == at || end - at > 6) return std::nullopt;
  const std::string layer = name.substr(at, end - at), rest = name.substr(end);
  for (const char which : {'A', 'B'}) {
    const std::string w = std::string("lora_") + which + ".weight";
    const std::string path = "model.layers." + layer + ".moe.experts";
    if (rest == ".mlp.experts.base_layer." + w) return ExpertTensor{path, "gate_up_proj", which};
    if (rest == ".mlp.experts." + w) return ExpertTensor{path, "down_proj", which};
  }
  return std::nullopt;
}

// The PEFT name of an adapted experts' tensor (the inverse of expert_adapter).
static std::string expert_tensor_name(const std::string& experts_fqn, const std::string& param, char which) {
  // "layers.<i>.moe.experts" -> "model.layers.<i>.mlp.experts"
  const std::string layer = experts_fqn.substr(0, experts_fqn.find(".moe.experts"));
  return std::string(kPrefix) + "model." + layer + ".mlp.experts." + (param == "gate_up_proj" ? "base_layer." : "") +
         "lora_" + which + ".weight";
}

// "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight" -> ("model.layers.0.attention.wq",
// 'A'); nullopt for anything else.
static std::optional<std::pair<std::string, char>> adapter_target(const std::string& name) {
  if (!name.starts_with(kPrefix)) return std::nullopt;
  if (expert_adapter(name)) return std::nullopt;  // read by expert_adapter
  for (const char which : {'A', 'B'}) {
    const std::string suffix = std::string(".lora_") + which + ".weight";
    if (!name.ends_with(suffix)) continue;
    const std::string module = name.substr(std::strlen(kPrefix), name.size() - std::strlen(kPrefix) - suffix.size());
    const std::optional<std::string> fqn = from_hf_name(module + ".weight");
    if (!fqn || !fqn->ends_with(".weight")) return std::nullopt;
    const std::string path = "model." + fqn->substr(0, fqn->size() - std::string(".weight").size());
    for (const std::string& pattern : plugins::lora_target_patterns({"all-linear"})) {
      if (plugins::glob_match(pattern, path)) return std::make_pair(path, which);
    }
    return std::nullopt;
  }
  return std::nullopt;
}

namespace {

// PEFT's module selection (peft.tuners.tuners_utils.check_target_module_exists): a list of names
// matches a module key equal to one or ending in "." + one; a string is a regex the whole key must
// match, or "all-linear" (every projection titan adapts); layers_to_transform keeps the modules of
// those layer indices ("model.layers.<i>.").
struct ModuleFilter {
  std::vector<std::string> names;
  std::optional<std::regex> pattern;
  std::vector<int64_t> layers;  // empty: every layer

  bool selects(const std::string& key) const {
    bool target = names.empty() && !pattern;  // "all-linear" or none given
    for (const std::string& n : names) target = target || key == n || key.ends_with("." + n);
    if (pattern) target = std::regex_match(key, *pattern);
    if (!target || layers.empty()) return target;
    const size_t at = key.find(".layers.");
    if (at == std::string::npos) return false;
    const int64_t layer = std::strtoll(key.c_str() + at + 8, nullptr, 10);
    return std::find(layers.begin(), layers.end(), layer) != layers.end();
  }
};

ModuleFilter module_filter(const std::string& config_path, const nlohmann::json* targets,
                           const nlohmann::json* layers) {
  ModuleFilter f;
  if (targets != nullptr && targets->is_array()) {
    for (const nlohmann::json& t : *targets) f.names.push_back(t.get<std::string>());
  } else if (targets != nullptr && targets->get<std::string>() != "all-linear") {
    try {
      f.pattern.emplace(targets->get<std::string>());
    } catch (const std::regex_error& e) {
      TITAN_FAIL("[adapter] ", config_path, ": target_modules \"", abbreviate(targets->get<std::string>()),
                 "\" is not a regular expression titan reads (", e.what(), ")");
    }
  }
  if (layers != nullptr) {
    bool ok = layers->is_number_integer() || layers->is_array();
    for (const nlohmann::json& l : layers->is_array() ? *layers : nlohmann::json::array({*layers})) {
      ok = ok && l.is_number_integer() && l.get<int64_t>() >= 0;
      if (ok) f.layers.push_back(l.get<int64_t>());
    }
    TITAN_CHECK(ok, "[adapter] ", config_path, ": layers_to_transform is ", abbreviate(layers->dump()),
                "; it must be a layer index or a list of them");
  }
  return f;
}

}  // namespace

PeftAdapter read_peft_adapter(const std::string& dir) {
  const std::string config_path = dir + "/adapter_config.json";
  const std::string weights_path = dir + "/adapter_model.safetensors";
  TITAN_CHECK(fs::is_regular_file(config_path), "[adapter] ", config_path, " does not exist. HINT: --adapter takes a "
              "PEFT adapter folder (adapter_config.json + adapter_model.safetensors), e.g. what lora.save_adapter wrote");
  TITAN_CHECK(fs::is_regular_file(weights_path), "[adapter] ", weights_path, " does not exist. HINT: save the "
              "adapter with safetensors (PEFT's default); adapter_model.bin is not read");
  const nlohmann::json c = ckpt::read_json_file(config_path);
  const auto field = [&](const char* key) -> const nlohmann::json* {
    const auto it = c.find(key);
    return it == c.end() || it->is_null() ? nullptr : &*it;
  };
  const auto refuse = [&](const char* key, const std::string& why) {
    TITAN_FAIL("[adapter] ", config_path, ": ", key, " ", why);
  };
  const nlohmann::json* type = field("peft_type");
  if (type == nullptr || !type->is_string() || type->get<std::string>() != "LORA") {
    refuse("peft_type", "is not \"LORA\"; only LoRA adapters are supported");
  }
  PeftAdapter a;
  a.dir = dir;
  const nlohmann::json* r = field("r");
  if (r == nullptr || !r->is_number_integer() || r->get<int64_t>() < 1) refuse("r", "must be an integer >= 1");
  a.rank = r->get<int64_t>();
  const nlohmann::json* alpha = field("lora_alpha");
  if (alpha == nullptr || !alpha->is_number() || !(alpha->get<double>() > 0)) refuse("lora_alpha", "must be a number > 0");
  a.alpha = alpha->get<double>();
  for (const char* flag : {"use_rslora", "use_dora", "fan_in_fan_out", "lora_bias", "use_qalora"}) {
    const nlohmann::json* f = field(flag);
    if (f != nullptr && f->is_boolean() && f->get<bool>()) refuse(flag, "is true; titan applies plain LoRA only");
  }
  for (const char* pattern : {"rank_pattern", "alpha_pattern"}) {
    const nlohmann::json* f = field(pattern);
    if (f != nullptr && !f->empty()) refuse(pattern, "is set; titan applies one rank and alpha to every module");
  }
  const nlohmann::json* bias = field("bias");
  if (bias != nullptr && (!bias->is_string() || bias->get<std::string>() != "none")) {
    refuse("bias", "is not \"none\"; trained biases are not supported");
  }
  // The adapted modules come from the tensors' names; target_modules must still be what PEFT
  // reads (a list of module names, or one string: a regex or "all-linear"), or the file is not PEFT's.
  if (const nlohmann::json* t = field("target_modules"); t != nullptr && !t->is_string()) {
    bool strings = t->is_array();
    for (const nlohmann::json& m : strings ? *t : nlohmann::json::array()) strings = strings && m.is_string();
    if (!strings) {
      refuse("target_modules", str("is ", abbreviate(t->dump()), "; it must be a list of strings or a string"));
    }
  }
  bool expert_targets = false;
  if (const nlohmann::json* t = field("target_parameters"); t != nullptr && !t->empty()) {
    // Either order: PEFT wraps the module's parameters in their definition order (gate_up_proj
    // innermost, under base_layer) and saves the list sorted.
    const nlohmann::json a = nlohmann::json::array({"mlp.experts.gate_up_proj", "mlp.experts.down_proj"});
    const nlohmann::json b = nlohmann::json::array({"mlp.experts.down_proj", "mlp.experts.gate_up_proj"});
    if (*t != a && *t != b) {
      refuse("target_parameters", str("is ", abbreviate(t->dump()), "; titan adapts [\"mlp.experts.down_proj\", "
                                      "\"mlp.experts.gate_up_proj\"] (a MoE layer's fused experts, both)"));
    }
    expert_targets = true;
  }
  for (const char* extra : {"modules_to_save", "trainable_token_indices"}) {
    const nlohmann::json* f = field(extra);
    if (f != nullptr && !f->empty()) refuse(extra, "is set; only lora_A / lora_B tensors of projections are applied");
  }

  const ModuleFilter adapted = module_filter(config_path, field("target_modules"), field("layers_to_transform"));

  const ckpt::SafetensorsFile file = ckpt::SafetensorsFile::open(weights_path);
  std::map<std::string, int> seen;  // path -> bit 1 (A), bit 2 (B)
  std::map<std::string, std::string> hf_module;  // path -> the HF module key ("model.layers.0.self_attn.q_proj")
  std::map<std::string, int> experts_seen;        // path -> bits: gate_up A 1, B 2, down A 4, B 8
  for (const ckpt::TensorInfo& info : file.tensors()) {
    const std::string& name = info.name;
    if (const std::optional<ExpertTensor> e = expert_adapter(name)) {
      TITAN_CHECK(expert_targets, "[adapter] ", weights_path, ": tensor '", name, "' adapts MoE experts but ",
                  config_path, " has no target_parameters");
      experts_seen[e->path] |= (e->param == "gate_up_proj" ? 1 : 4) * (e->which == 'A' ? 1 : 2);
      continue;
    }
    const auto target = adapter_target(name);
    TITAN_CHECK(target.has_value(), "[adapter] ", weights_path, ": tensor '", name, "' is not a lora_A / lora_B weight "
                "of a projection titan adapts (base_model.model.model.layers.<i>.<module>.lora_A.weight, the module one of ",
                plugins::peft_module_names(), ")");
    seen[target->first] |= target->second == 'A' ? 1 : 2;
    hf_module[target->first] = name.substr(std::strlen(kPrefix), name.rfind(".lora_") - std::strlen(kPrefix));
  }
  TITAN_CHECK(!seen.empty() || !experts_seen.empty(), "[adapter] ", weights_path, " holds no tensors");
  for (const auto& [path, bits] : experts_seen) {
    TITAN_CHECK(bits == 15, "[adapter] ", weights_path, ": ", path, " lacks some of the four expert tensors (gate_up "
                "and down, lora_A and lora_B)");
    a.experts.push_back(path);
  }
  for (const auto& [path, bits] : seen) {
    TITAN_CHECK(bits == 3, "[adapter] ", weights_path, ": ", path, " has lora_", bits == 1 ? "A" : "B",
                " but no lora_", bits == 1 ? "B" : "A");
    // PEFT adapts what target_modules and layers_to_transform select and ignores the file's other
    // tensors (they load as unexpected keys).
    if (adapted.selects(hf_module[path])) a.modules.push_back(path);
  }
  TITAN_CHECK(!a.modules.empty() || !a.experts.empty(), "[adapter] ", config_path,
              ": target_modules and layers_to_transform select none of ",
              "the ", seen.size(), " modules in ", weights_path, " (PEFT: \"Target modules not found in the base model\")",
              ". HINT: the adapter was made for another model, or its config was edited");
  return a;
}

void load_peft_weights(nn::Decoder& model, const PeftAdapter& adapter) {
  const std::string weights_path = adapter.dir + "/adapter_model.safetensors";
  const ckpt::SafetensorsFile file = ckpt::SafetensorsFile::open(weights_path);
  const std::map<std::string, nn::LoraLinear*> lora = nn::lora_linears(model);
  TITAN_CHECK(lora.size() == adapter.modules.size(), "[adapter] ", adapter.dir, " adapts ", adapter.modules.size(),
              " modules but the model has ", lora.size(), " LoRA projections");
  const std::map<std::string, nn::LoraExperts*> experts = nn::lora_experts(model);
  TITAN_CHECK(experts.size() == adapter.experts.size(), "[adapter] ", adapter.dir, " adapts the experts of ",
              adapter.experts.size(), " layers but the model has ", experts.size(), " LoRA expert stacks");
  for (const auto& [fqn, e] : experts) {
    for (const auto& [p, param, which] :
         {std::tuple{&e->gate_up_A, "gate_up_proj", 'A'}, {&e->gate_up_B, "gate_up_proj", 'B'},
          {&e->down_A, "down_proj", 'A'}, {&e->down_B, "down_proj", 'B'}}) {
      const std::string name = expert_tensor_name(fqn, param, which);
      const ckpt::TensorInfo* info = file.find(name);
      TITAN_CHECK(info != nullptr, "[adapter] ", weights_path, ": no tensor '", name, "'");
      TITAN_CHECK(info->shape == p->value.shape(), "[adapter] ", weights_path, ": '", name, "' has shape ",
                  shape_str(info->shape), " but the base model's experts with r = ", adapter.rank, " need ",
                  shape_str(p->value.shape()), ". HINT: the adapter was trained on another base model");
      p->value.copy_from(file.get(name));
    }
  }
  for (const auto& [base_fqn, linear] : lora) {
    const std::string module = to_hf_name(base_fqn);
    const std::string stem = kPrefix + module.substr(0, module.size() - std::string(".weight").size());
    for (nn::Parameter* p : {&linear->lora_A, &linear->lora_B}) {
      const std::string name = stem + (p == &linear->lora_A ? ".lora_A.weight" : ".lora_B.weight");
      const ckpt::TensorInfo* info = file.find(name);
      TITAN_CHECK(info != nullptr, "[adapter] ", weights_path, ": no tensor '", name, "'");
      TITAN_CHECK(info->shape == p->value.shape(), "[adapter] ", weights_path, ": '", name, "' has shape ",
                  shape_str(info->shape), " but the base model's ", module, " with r = ", adapter.rank, " needs ",
                  shape_str(p->value.shape()), ". HINT: the adapter was trained on another base model; pass that "
                  "model's folder");
      TITAN_CHECK(info->dtype == DType::f32 || info->dtype == DType::bf16 || info->dtype == DType::f16, "[adapter] ",
                  weights_path, ": '", name, "' has dtype ", dtype_name(info->dtype), "; expected F32, BF16 or F16");
      p->value.copy_from(file.get(name));
    }
  }
}

std::unique_ptr<nn::Decoder> load_hf_model_with_adapter(const ModelSpec& spec, const std::string& dir,
                                                         const std::string& adapter_dir,
                                                         std::optional<ops::QuantKind> base_quant) {
  TITAN_CHECK(!base_quant || !adapter_dir.empty(), "[adapter] a quantized base needs an adapter (internal)");
  if (adapter_dir.empty()) return load_hf_model(spec, dir);
  const PeftAdapter adapter = read_peft_adapter(adapter_dir);
  const nn::DecoderConfig config = spec.hf.read_config(dir);
  nn::ConfigTree tree = spec.config_tree(config);
  for (const std::string& path : adapter.experts) {
    TITAN_CHECK(tree.count(path) > 0, "[adapter] ", adapter_dir, " adapts ", path, ", which the model in ", dir,
                " does not have. HINT: the adapter was trained on another base model");
  }
  for (const std::string& path : adapter.modules) {
    TITAN_CHECK(tree.count(path) > 0, "[adapter] ", adapter_dir, " adapts ", path, ", which the model in ", dir,
                " does not have (", config.num_layers, " layers", config.num_experts > 0 ? ", MoE" : "",
                "). HINT: the adapter was trained on another base model");
  }
  plugins::LoraOptions options;
  options.rank = adapter.rank;
  options.alpha = adapter.alpha;
  options.target_modules = adapter.modules;
  std::vector<plugins::Override> overrides;
  if (!adapter.modules.empty()) overrides.push_back(plugins::lora_override(options));
  if (!adapter.experts.empty()) {
    plugins::Override experts = plugins::lora_experts_override(adapter.rank, adapter.alpha);
    experts.fqn_patterns = adapter.experts;
    overrides.push_back(std::move(experts));
  }
  plugins::apply_overrides(tree, overrides);
  std::optional<nn::FrozenParameterScope> frozen;  // QLoRA: the base frozen, its linear weights quantized
  if (base_quant) frozen.emplace(DType::f32, base_quant);
  std::unique_ptr<nn::Decoder> model = spec.build(config, tree);
  frozen.reset();
  spec.hf.load_weights(*model, dir);
  load_peft_weights(*model, adapter);
  log_info(str("[adapter] ", adapter_dir, ": LoRA r = ", adapter.rank, ", alpha ", adapter.alpha, " on ",
               adapter.modules.size(), " projections",
               adapter.experts.empty() ? std::string()
                                       : str(" and the experts of ", adapter.experts.size(), " MoE layers")));
  return model;
}

void save_peft_adapter(nn::Decoder& model, const ckpt::OutputFolder& dir, int64_t rank, double alpha,
                       const std::string& base_model_name_or_path) {
  const std::map<std::string, nn::LoraLinear*> lora = nn::lora_linears(model);
  const std::map<std::string, nn::LoraExperts*> experts = nn::lora_experts(model);
  TITAN_CHECK(!lora.empty() || !experts.empty(), "[adapter] the model has no LoRA projections to save");
  std::vector<std::pair<std::string, Tensor>> tensors;
  nlohmann::json targets = nlohmann::json::array();
  for (const auto& [fqn, e] : experts) {
    tensors.emplace_back(expert_tensor_name(fqn, "gate_up_proj", 'A'), e->gate_up_A.value);
    tensors.emplace_back(expert_tensor_name(fqn, "gate_up_proj", 'B'), e->gate_up_B.value);
    tensors.emplace_back(expert_tensor_name(fqn, "down_proj", 'A'), e->down_A.value);
    tensors.emplace_back(expert_tensor_name(fqn, "down_proj", 'B'), e->down_B.value);
  }
  for (const auto& [base_fqn, linear] : lora) {
    const std::string module = to_hf_name(base_fqn);
    const std::string stem = module.substr(0, module.size() - std::string(".weight").size());
    targets.push_back(stem);
    tensors.emplace_back(kPrefix + stem + ".lora_A.weight", linear->lora_A.value);
    tensors.emplace_back(kPrefix + stem + ".lora_B.weight", linear->lora_B.value);
  }
  nlohmann::json c = {{"peft_type", "LORA"},
                      {"task_type", "CAUSAL_LM"},
                      {"base_model_name_or_path", base_model_name_or_path},
                      {"r", rank},
                      {"lora_alpha", alpha},
                      {"lora_dropout", lora.empty() ? 0.0 : lora.begin()->second->dropout()},
                      {"target_modules", targets},
                      {"bias", "none"},
                      {"fan_in_fan_out", false},
                      {"inference_mode", true},
                      {"init_lora_weights", true},
                      {"modules_to_save", nullptr},
                      {"use_rslora", false},
                      {"use_dora", false},
                      {"rank_pattern", nlohmann::json::object()},
                      {"alpha_pattern", nlohmann::json::object()}};
  // target_parameters as PEFT saves the list (sorted).
  if (!experts.empty()) c["target_parameters"] = {"mlp.experts.down_proj", "mlp.experts.gate_up_proj"};
  write_folder_atomic(dir, [&](const std::string& tmp) {
    ckpt::write_safetensors(tmp + "/adapter_model.safetensors", tensors, {{"format", "pt"}});
    ckpt::write_text_file_atomic(tmp + "/adapter_config.json", c.dump(2) + "\n");
  });
  log_info(str("[adapter] wrote ", dir.path, " (PEFT LoRA, r = ", rank, ", ", lora.size(), " projections",
               experts.empty() ? std::string() : str(", the experts of ", experts.size(), " MoE layers"), ")"));
}

}  // namespace titan::models
