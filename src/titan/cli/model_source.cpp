#include "titan/cli/model_source.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "titan/checkpoint/json_file.h"
#include "titan/checkpoint/train_state.h"
#include "titan/cli/args.h"
#include "titan/config/overrides.h"
#include "titan/checkpoint/gguf.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/gguf_model.h"
#include "titan/models/decoder/peft.h"
#include "titan/train/checkpointer.h"
#include "titan/train/memory_check.h"
#include "titan/train/trainer.h"

namespace titan::cli {

namespace fs = std::filesystem;

// The memory floor of inference (train/memory_check.h) for `config`, refused in one line naming
// config.json's field (or the batch) to lower.
static void check_floor(const nn::DecoderConfig& config, const std::string& label, const std::string& config_path,
                        double adapter_elements, const InferenceSize& size, const std::string& adapter_dir = "") {
  train::FloorFields fields;
  fields.adapter_rank = "r in " + adapter_dir + "/adapter_config.json";
  fields.layers = "num_hidden_layers in " + config_path;
  fields.vocab = "vocab_size in " + config_path;
  fields.batch = size.batch;
  train::check_memory_floor(train::inference_memory_floor(config, adapter_elements, size.rows, size.cache_positions,
                                                          size.logit_positions),
                            train::available_memory_per_rank(), label, fields);
}

void check_inference_memory(const LoadedModel& loaded, const InferenceSize& size) {
  check_floor(loaded.model->config(), loaded.label, loaded.config_path, loaded.adapter_elements, size,
              loaded.adapter_dir);
}

// rank x (in + out) over the projections a PEFT adapter names (those the model lacks are named by
// load_hf_model_with_adapter), checked only after the base alone passed the floor: the config
// tree it walks has a node per layer.
static double adapter_elements(const models::ModelSpec& spec, const nn::DecoderConfig& config,
                               const std::string& adapter_dir) {
  const models::PeftAdapter adapter = models::read_peft_adapter(adapter_dir);
  const nn::ConfigTree tree = spec.config_tree(config);
  double n = 0;
  for (const std::string& path : adapter.modules) {
    const auto it = tree.find(path);
    const auto* linear = it == tree.end() ? nullptr : dynamic_cast<const nn::LinearConfig*>(it->second.get());
    if (linear) n += static_cast<double>(adapter.rank) * static_cast<double>(linear->in_features + linear->out_features);
  }
  return n;
}

// A Hugging Face model (a folder, or a GGUF file standing for one) with its optional adapter:
// `out` names its spec, config file and assets; the floors are checked before anything is built.
static LoadedModel load_hf_like(LoadedModel out, const std::string& weights, const std::string& adapter_dir,
                                const InferenceSize& size, std::optional<ops::QuantKind> base_quant) {
  const nn::DecoderConfig config = out.spec->hf.read_config(weights);
  out.label = "the model of " + out.config_path;
  check_floor(config, out.label, out.config_path, 0.0, size);  // the base first: a config.json's 1e9 layers
  if (!adapter_dir.empty()) {
    out.adapter_elements = adapter_elements(*out.spec, config, adapter_dir);
    out.adapter_dir = adapter_dir;
    out.label += " with the adapter " + adapter_dir;
    check_floor(config, out.label, out.config_path, out.adapter_elements, size, adapter_dir);
  }
  out.model = models::load_hf_model_with_adapter(*out.spec, weights, adapter_dir, base_quant);
  return out;
}

LoadedModel load_inference_model(const std::string& dir, const std::string& adapter_dir, const InferenceSize& size,
                                 std::optional<ops::QuantKind> base_quant) {
  LoadedModel out;
  if (ckpt::is_gguf_file(dir)) {
    out.assets_lease = models::GgufModel::open(dir)->write_temp_assets(&out.assets_dir);
    out.spec = &models::family_of_hf_folder(out.assets_dir);
    out.config_path = dir;
    return load_hf_like(std::move(out), dir, adapter_dir, size, base_quant);
  }
  TITAN_CHECK(fs::is_directory(dir), "[model] ", dir, " is neither a folder nor a GGUF file. HINT: pass a Hugging Face "
              "model folder (config.json + safetensors), a .gguf file or a checkpoint step-<N> folder");
  if (fs::exists(fs::path(dir) / "manifest.json")) {
    if (!adapter_dir.empty()) {
      throw UsageError(str("an adapter applies to a Hugging Face folder; ", dir, " is a native checkpoint"));
    }
    const ckpt::TrainState state = ckpt::load_train_state(dir, /*model_only=*/true);
    config::JobConfig c;
    config::apply_toml_text(c, state.config_toml, dir + "/config.toml");
    const models::ResolvedModel resolved = train::resolve_model(c);
    out.label = c.model.name.empty() ? "the model of " + c.model.hf_assets_path + "/config.json"
                                     : "model '" + c.model.name + "'";
    out.config_path = c.model.name.empty() ? c.model.hf_assets_path + "/config.json" : dir + "/config.toml";
    check_floor(resolved.config, out.label, out.config_path, 0.0, size);
    out.model = models::build_model(*resolved.spec, resolved.config);
    train::restore_model(state, out.model->state(), dir);
    out.spec = resolved.spec;
    out.assets_dir = c.model.hf_assets_path;
    return out;
  }
  out.spec = &models::family_of_hf_folder(dir);  // names config.json when it is missing
  out.config_path = (fs::path(dir) / "config.json").string();
  out.assets_dir = dir;
  return load_hf_like(std::move(out), dir, adapter_dir, size, base_quant);
}

Tensor read_token_ids(const ckpt::SafetensorsFile& file, const std::string& name) {
  const ckpt::TensorInfo* info = file.find(name);
  TITAN_CHECK(info != nullptr, file.path(), ": no tensor '", name, "'. HINT: the tokens file needs input_ids [B, T]");
  TITAN_CHECK(info->dtype == DType::i64 || info->dtype == DType::i32, file.path(), ": tensor '", name,
              "' has dtype ", dtype_name(info->dtype), "; expected I64 or I32");
  TITAN_CHECK(info->shape.size() == 2 && info->shape[0] > 0 && info->shape[1] > 0, file.path(),
              ": tensor '", name, "' has shape ", shape_str(info->shape), "; expected [B, T] with B, T > 0");
  const Tensor raw = file.get(name);
  if (info->dtype == DType::i64) return raw.clone();
  Tensor out = Tensor::empty(info->shape, DType::i64);
  for (int64_t i = 0; i < raw.numel(); ++i) out.data<int64_t>()[i] = raw.data<int32_t>()[i];
  return out;
}

// The field `name` of dir/file as a list of ids (an integer, a list of them, null or absent).
static std::vector<int64_t> id_list(const std::string& dir, const char* file, const char* name, bool* present) {
  *present = false;
  const fs::path path = fs::path(dir) / file;
  if (dir.empty() || !fs::exists(path)) return {};
  const nlohmann::json j = ckpt::read_json_file(path.string());
  if (!j.is_object() || !j.contains(name) || j[name].is_null()) return {};
  *present = true;
  std::vector<int64_t> ids;
  for (const nlohmann::json& v : j[name].is_array() ? j[name] : nlohmann::json::array({j[name]})) {
    TITAN_CHECK(v.is_number_integer(), path.string(), ": field '", name, "' must be an integer or a list of integers, got ",
                v.dump());
    ids.push_back(v.get<int64_t>());
  }
  return ids;
}

std::vector<int64_t> read_eos_ids(const std::string& assets_dir) {
  bool present = false;
  std::vector<int64_t> ids = id_list(assets_dir, "generation_config.json", "eos_token_id", &present);
  if (present) return ids;
  return id_list(assets_dir, "config.json", "eos_token_id", &present);
}

int64_t read_pad_id(const std::string& assets_dir, const std::vector<int64_t>& eos_ids) {
  bool present = false;
  std::vector<int64_t> ids = id_list(assets_dir, "generation_config.json", "pad_token_id", &present);
  if (!present) ids = id_list(assets_dir, "config.json", "pad_token_id", &present);
  if (!ids.empty()) return ids.front();
  return eos_ids.empty() ? 0 : eos_ids.front();
}

}  // namespace titan::cli
