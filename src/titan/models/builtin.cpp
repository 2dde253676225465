#include "titan/models/builtin.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "titan/checkpoint/json_file.h"
#include "titan/config/registry.h"
#include "titan/core/abbreviate.h"
#include "titan/core/error.h"
#include "titan/models/llama/family.h"
#include "titan/models/qwen3/family.h"
#include "titan/models/qwen3_5/family.h"

namespace titan::models {

const std::vector<const ModelSpec*>& model_families() {
  // The explicit list: one line per family, no static-initializer registration.
  static const std::vector<const ModelSpec*> all = {
      &qwen3::family(),
      &qwen3_5::family(),
      &llama::family(),
  };
  return all;
}

std::unique_ptr<nn::Decoder> build_model(const ModelSpec& spec, const nn::DecoderConfig& config) {
  return spec.build(config, spec.config_tree(config));
}

const NamedSize* ModelSpec::find_size(const std::string& size_name) const {
  for (const NamedSize& s : sizes) {
    if (s.name == size_name) return &s;
  }
  return nullptr;
}

const ModelSpec& find_family(const std::string& name) {
  std::string known;
  for (const ModelSpec* f : model_families()) {
    if (f->name == name) return *f;
    known += (known.empty() ? "" : ", ") + f->name;
  }
  TITAN_FAIL("[model] unknown model family '", abbreviate(name), "'. HINT: use one of ", known);
}

const ModelSpec& family_of_size(const std::string& size_name) {
  std::string known;
  for (const ModelSpec* f : model_families()) {
    if (f->find_size(size_name) != nullptr) return *f;
    for (const NamedSize& s : f->sizes) known += (known.empty() ? "" : ", ") + s.name;
  }
  TITAN_FAIL("[model] unknown model.name '", abbreviate(size_name), "': no model family has a size of that name. "
             "HINT: use one of ", known,
             ", or an empty model.name to build the model from model.hf_assets_path/config.json");
}

const NamedSize& find_size(const std::string& size_name) { return *family_of_size(size_name).find_size(size_name); }

const ModelSpec& family_of_architecture(const std::string& architecture) {
  std::string known;
  for (const ModelSpec* f : model_families()) {
    for (const std::string& a : f->hf.architectures) {
      if (a == architecture) return *f;
      known += (known.empty() ? "" : ", ") + a;
    }
  }
  TITAN_FAIL("[model] no model family reads architecture '", architecture, "'. HINT: use one of ", known);
}

const ModelSpec& family_of_hf_folder(const std::string& hf_dir) {
  const std::string path = (std::filesystem::path(hf_dir) / "config.json").string();
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) {
    const nlohmann::json j = ckpt::read_json_file(path);
    const auto arch = j.find("architectures");
    if (arch != j.end() && arch->is_array() && arch->size() == 1 && (*arch)[0].is_string()) {
      for (const ModelSpec* f : model_families()) {
        for (const std::string& a : f->hf.architectures) {
          if (a == (*arch)[0].get<std::string>()) return *f;
        }
      }
    }
  }
  // No family claims the folder: a family's reader says why in one line (a missing file, a bad
  // `architectures` field, an architecture it does not know, with the ones it does).
  model_families().front()->hf.read_config(hf_dir);
  TITAN_FAIL("[model] ", path, ": no model family reads this folder's architecture");
}

ResolvedModel resolve_model(const std::string& size_name, const std::string& hf_dir, int64_t n_layers) {
  ResolvedModel m;
  if (!size_name.empty()) {
    m.spec = &family_of_size(size_name);
    m.config = m.spec->find_size(size_name)->config;
  } else {
    TITAN_CHECK(!hf_dir.empty(), "[model] model.name is empty and model.hf_assets_path is not set. HINT: name a "
                "spec (model.name=debug) or point model.hf_assets_path at a folder with config.json");
    m.spec = &family_of_hf_folder(hf_dir);
    m.config = m.spec->hf.read_config(hf_dir);
  }
  TITAN_CHECK(n_layers >= 0, "[model] model.n_layers=", n_layers, " must be >= 0 (0 keeps the model's depth)");
  if (n_layers > 0) {
    m.config.num_layers = n_layers;
    // A hybrid model (Qwen3.5) keeps its pattern of layer kinds: layer i is the kind of layer
    // i mod the model's own count.
    std::vector<std::string>& types = m.config.layer_types;
    if (!types.empty()) {
      TITAN_CHECK(n_layers <= 1'000'000, "[model] model.n_layers=", n_layers, " is more layers than a hybrid model's ",
                  "layer kinds can be listed for. HINT: use fewer layers");
      std::vector<std::string> resized;
      for (int64_t i = 0; i < n_layers; ++i) resized.push_back(types[static_cast<size_t>(i) % types.size()]);
      types = std::move(resized);
    }
  }
  return m;
}

std::unique_ptr<nn::Decoder> load_hf_model(const ModelSpec& spec, const std::string& dir) {
  const nn::DecoderConfig config = spec.hf.read_config(dir);
  std::unique_ptr<nn::Decoder> model = build_model(spec, config);
  spec.hf.load_weights(*model, dir);
  return model;
}

// Fine-tuning a downloaded model on a downloaded dataset, whatever the family: the whole command is
// `titan train --config finetune --model.hf_path DIR --training.dataset_path DATA` (model.hf_path
// gives the tokenizer, the shape and the weights; the rows' layout is detected). A fine-tune's
// defaults: a low peak lr with a short warmup and cosine decay to 10%, bf16 compute on f32 master
// weights, checkpoints every 500 steps (the newest two kept), and at the end the model written
// back as a bf16 HF folder (checkpoint/hf) that Transformers loads as is. Without --model.hf_path
// the model folder is ./assets/hf/model, as the published configs keep theirs under ./assets/hf.
static config::JobConfig finetune() {
  config::JobConfig c = config::base_config();
  c.job.dump_folder = "./outputs/finetune";
  c.model.name = "";
  c.model.hf_path = c.model.hf_assets_path = c.checkpoint.initial_load_path = "./assets/hf/model";
  c.training.steps = 1000;
  c.training.local_batch_size = 2;
  c.training.seq_len = 2048;
  c.training.dataset_format = "auto";
  c.training.mixed_precision_param = "bfloat16";
  c.optimizer.lr = 2e-5;
  c.optimizer.weight_decay = 0.01;
  c.lr_scheduler.warmup_steps = 20;
  c.lr_scheduler.decay_ratio = -1.0;
  c.lr_scheduler.decay_type = "cosine";
  c.lr_scheduler.min_lr_factor = 0.1;
  c.checkpoint.enable = true;
  c.checkpoint.interval = 500;
  c.checkpoint.keep_latest_k = 2;
  c.checkpoint.initial_load_in_hf = true;
  c.checkpoint.initial_load_model_only = true;
  c.checkpoint.last_save_in_hf = true;
  c.checkpoint.last_save_model_only = true;
  c.checkpoint.export_dtype = "bfloat16";
  c.metrics.log_freq = 10;
  return c;
}

void register_config_functions() {
  static bool done = false;
  if (done) return;
  done = true;
  config::add_config_function({"finetune",
                               "fine-tune a downloaded model (--model.hf_path DIR) on --training.dataset_path (text, chat "
                               "or pretokenized rows): lr 2e-5 cosine, bf16 compute, checkpoints, bf16 HF export",
                               &finetune});
  for (const ModelSpec* f : model_families()) {
    if (f->configs == nullptr) continue;
    for (config::ConfigEntry& e : f->configs()) config::add_config_function(std::move(e));
  }
}

}  // namespace titan::models
