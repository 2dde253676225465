#include "titan/cli/model_source.h"

#include <filesystem>

#include "titan/checkpoint/json_file.h"
#include "titan/checkpoint/train_state.h"
#include "titan/cli/args.h"
#include "titan/config/overrides.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/peft.h"
#include "titan/train/checkpointer.h"
#include "titan/train/trainer.h"

namespace titan::cli {

namespace fs = std::filesystem;

LoadedModel load_inference_model(const std::string& dir, const std::string& adapter_dir) {
  TITAN_CHECK(fs::is_directory(dir), "[model] ", dir, " is not a folder. HINT: pass a Hugging Face model folder "
              "(config.json + safetensors) or a checkpoint step-<N> folder");
  LoadedModel out;
  if (fs::exists(fs::path(dir) / "manifest.json")) {
    if (!adapter_dir.empty()) {
      throw UsageError(str("an adapter applies to a Hugging Face folder; ", dir, " is a native checkpoint"));
    }
    const ckpt::TrainState state = ckpt::load_train_state(dir, /*model_only=*/true);
    config::JobConfig c;
    config::apply_toml_text(c, state.config_toml, dir + "/config.toml");
    const models::ResolvedModel resolved = train::resolve_model(c);
    out.model = std::make_unique<nn::Decoder>(resolved.config);
    train::restore_model(state, out.model->state(), dir);
    out.spec = resolved.spec;
    out.assets_dir = c.model.hf_assets_path;
    return out;
  }
  out.spec = &models::family_of_hf_folder(dir);  // names config.json when it is missing
  out.model = models::load_hf_model_with_adapter(*out.spec, dir, adapter_dir);
  out.assets_dir = dir;
  return out;
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
