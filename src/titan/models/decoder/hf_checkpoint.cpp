#include "titan/models/decoder/hf_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "titan/checkpoint/atomic_file.h"
#include "titan/checkpoint/gguf.h"
#include "titan/checkpoint/hf_folder.h"
#include "titan/checkpoint/json_file.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/core/log.h"
#include "titan/models/decoder/hf_config.h"
#include "titan/models/decoder/hf_names.h"
#include "titan/models/decoder/weights.h"
#include "titan/nn/lora.h"

namespace titan::models {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTokenizerFiles[] = {"tokenizer.json",  "tokenizer_config.json", "special_tokens_map.json",
                                           "vocab.json",      "merges.txt",            "generation_config.json",
                                           "chat_template.jinja", "chat_template.json"};

// The fields of a DecoderConfig that no tensor shape reveals, compared one by one.
void check_same_math(const nn::DecoderConfig& model, const nn::DecoderConfig& file, const std::string& path) {
  auto same = [&](const char* field, auto ours, auto theirs) {
    TITAN_CHECK(ours == theirs, path, ": field '", field, "' gives ", theirs, " but the model being trained has ",
                ours, ". HINT: build the model from this folder (empty model.name, model.hf_assets_path = it) "
                "or load a folder made for this spec");
  };
  same("rope_theta", model.rope_theta, file.rope_theta);
  same("rope_type", std::string(ops::rope_type_name(model.rope_scaling.type)),
       std::string(ops::rope_type_name(file.rope_scaling.type)));
  if (file.rope_scaling.type != ops::RopeType::default_) {  // a plain block may be spelled many ways
    same("RoPE scaling block", model.rope_scaling.hf_json, file.rope_scaling.hf_json);
  }
  same("rms_norm_eps", model.norm_eps, file.norm_eps);
  same("architectures (q/k norm)", model.qk_norm, file.qk_norm);
  same("attention_bias", model.attention_bias, file.attention_bias);
  same("architectures (q/k/v bias)", model.qkv_bias, file.qkv_bias);
  same("mlp_bias", model.mlp_bias, file.mlp_bias);
  same("tie_word_embeddings", model.tie_embeddings, file.tie_embeddings);
  same("partial_rotary_factor", model.partial_rotary_factor, file.partial_rotary_factor);
  same("architectures (attention output gate)", model.attn_output_gate, file.attn_output_gate);
  same("architectures (zero-centred norms)", model.zero_centered_norms, file.zero_centered_norms);
  same("shared_expert_intermediate_size", model.shared_expert_dim, file.shared_expert_dim);
  for (size_t i = 0; i < std::min(model.layer_types.size(), file.layer_types.size()); ++i) {
    same(str("layer_types[", i, "]").c_str(), model.layer_types[i], file.layer_types[i]);
  }
}

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return;  // best effort, as atomic_file does for directories
  (void)::fsync(fd);
  ::close(fd);
}

// Groups tensors in order into shards of at most max_bytes of data (HF's greedy rule: a tensor
// larger than the limit gets a shard of its own).
std::vector<std::vector<std::pair<std::string, Tensor>>> make_shards(
    std::vector<std::pair<std::string, Tensor>> tensors, int64_t max_bytes) {
  std::vector<std::vector<std::pair<std::string, Tensor>>> shards(1);
  int64_t bytes = 0;
  for (auto& named : tensors) {
    const auto size = static_cast<int64_t>(named.second.nbytes());
    if (!shards.back().empty() && bytes + size > max_bytes) {
      shards.emplace_back();
      bytes = 0;
    }
    shards.back().push_back(std::move(named));
    bytes += size;
  }
  return shards;
}

std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

void move(const std::string& from, const std::string& to) {
  TITAN_CHECK(::rename(from.c_str(), to.c_str()) == 0, "[hf export] renaming ", from, " to ", to, " failed: ",
              std::strerror(errno));
}

// Moves the finished `tmp` folder to `out`: an atomic exchange when `out` exists (the old folder
// then sits at `tmp` and is removed), a plain rename otherwise.
void commit_folder(const std::string& tmp, const std::string& out) {
  std::error_code ec;
  if (fs::exists(out, ec)) {
    TITAN_CHECK(fs::is_directory(out, ec), "[hf export] ", out, " exists and is not a directory; refusing to "
                "replace it. HINT: choose another output path");
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, out.c_str(), RENAME_EXCHANGE) != 0) {
      // Filesystems without RENAME_EXCHANGE: move the old folder aside, then the new one in.
      TITAN_CHECK(errno == EINVAL || errno == ENOSYS, "[hf export] replacing ", out, " with ", tmp,
                  " failed: ", std::strerror(errno));
      const std::string old = tmp + ".old";
      fs::remove_all(old, ec);
      move(out, old);
      move(tmp, out);
      fs::remove_all(old, ec);
    } else {
      fs::remove_all(tmp, ec);
    }
  } else {
    move(tmp, out);
  }
  const fs::path parent = fs::path(out).parent_path();
  fsync_path(parent.empty() ? "." : parent.string(), true);
}

// The text architecture a multimodal Qwen3.5 folder's language model is ("" for any other).
std::string multimodal_text_architecture(const std::string& arch) {
  if (arch == "Qwen3_5ForConditionalGeneration") return "Qwen3_5ForCausalLM";
  if (arch == "Qwen3_5MoeForConditionalGeneration") return "Qwen3_5MoeForCausalLM";
  return "";
}

// A multimodal export: the source folder's config.json with our text_config, and its tensors that
// are not the language model's (vision tower, MTP) as they are stored there.
void add_multimodal_parts(const std::string& arch, const std::string& source_dir, nlohmann::json& config_json,
                          std::vector<std::pair<std::string, Tensor>>& tensors, const ckpt::HfWeights& source) {
  nlohmann::json whole = ckpt::read_json_file((fs::path(source_dir) / "config.json").string());
  nlohmann::json text = config_json;
  for (const char* key : {"architectures", "torch_dtype", "dtype", "tie_word_embeddings"}) text.erase(key);
  whole["text_config"] = text;
  whole["tie_word_embeddings"] = config_json["tie_word_embeddings"];
  whole["dtype"] = config_json["dtype"];
  if (whole.contains("torch_dtype")) whole["torch_dtype"] = config_json["dtype"];
  config_json = whole;
  for (auto& [name, t] : tensors) name = folder_tensor_name(arch, name);
  for (const std::string& name : source.names()) {
    if (name.starts_with("model.visual.") || name.starts_with("mtp.")) tensors.emplace_back(name, source.get(name));
  }
}

void write_folder(const nn::Decoder& model, const std::string& dir, const HfExportOptions& options) {
  const nn::DecoderConfig& config = model.config();
  const std::string arch = options.architecture.empty() ? default_hf_architecture(config) : options.architecture;
  const std::string text_arch = multimodal_text_architecture(arch);
  nlohmann::json config_json = config_to_hf(config, text_arch.empty() ? arch : text_arch, options.dtype);
  const DType dtype = options.dtype == "bfloat16" ? DType::bf16 : DType::f32;

  // parameters() only hands out pointers; nothing here writes through them. LoRA adapters are
  // merged into their base weights (a plain model's weights are its values).
  std::vector<std::pair<std::string, Tensor>> tensors;
  nn::for_each_merged_weight(const_cast<nn::Decoder&>(model), [&](const std::string& fqn, const Tensor& value) {
    for (const auto& [name, t] : to_hf_tensors(fqn, value)) tensors.emplace_back(name, t.to(dtype));
  });
  std::optional<ckpt::HfWeights> source;  // kept open while the shards are written (views of its files)
  if (!text_arch.empty()) {
    source.emplace(ckpt::HfWeights::open(options.source_dir));
    add_multimodal_parts(arch, options.source_dir, config_json, tensors, *source);
  }
  int64_t total = 0;
  for (const auto& [name, t] : tensors) total += static_cast<int64_t>(t.nbytes());

  const std::map<std::string, std::string> metadata = {{"format", "pt"}};
  auto shards = make_shards(std::move(tensors), options.max_shard_bytes);
  if (shards.size() == 1) {
    ckpt::write_safetensors((fs::path(dir) / "model.safetensors").string(), shards[0], metadata);
  } else {
    nlohmann::json index;
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = nlohmann::json::object();
    for (size_t i = 0; i < shards.size(); ++i) {
      const std::string name = shard_name(i, shards.size());
      ckpt::write_safetensors((fs::path(dir) / name).string(), shards[i], metadata);
      for (const auto& [tensor, value] : shards[i]) index["weight_map"][tensor] = name;
    }
    ckpt::write_text_file_atomic((fs::path(dir) / "model.safetensors.index.json").string(), index.dump(2) + "\n");
  }

  if (!options.tokenizer_dir.empty()) {
    const fs::path src(options.tokenizer_dir);
    std::error_code ec;
    TITAN_CHECK(fs::is_directory(src, ec), "[hf export] tokenizer folder ", options.tokenizer_dir,
                " is not a directory. HINT: point it at the run's model.hf_assets_path");
    for (const char* name : kTokenizerFiles) {
      if (!fs::is_regular_file(src / name, ec)) continue;
      ckpt::write_text_file_atomic((fs::path(dir) / name).string(), ckpt::read_file_bytes((src / name).string()));
    }
    if (fs::is_regular_file(src / "config.json", ec)) {
      const nlohmann::json source = ckpt::read_json_file((src / "config.json").string());
      for (const char* key : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
        if (source.is_object() && source.contains(key)) config_json[key] = source[key];
      }
    }
  }
  ckpt::write_text_file_atomic((fs::path(dir) / "config.json").string(), config_json.dump(2) + "\n");
  fsync_path(dir, true);
}

}  // namespace

void load_initial_hf(nn::Decoder& model, const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  std::error_code ec;
  if (ckpt::is_gguf_file(dir)) {
    check_same_math(model.config(), load_hf_config(dir), dir);
  } else if (fs::exists(config_path, ec)) {
    check_same_math(model.config(), load_hf_config(dir), config_path);
  }
  load_hf_weights(model, dir);
}

std::string hf_architecture(const std::string& dir) {
  const std::string path = (fs::path(dir) / "config.json").string();
  std::error_code ec;
  if (!fs::exists(path, ec)) return "";
  const nlohmann::json j = ckpt::read_json_file(path);
  config_from_hf(j, path);  // one-line errors for a folder we could not load anyway
  return j["architectures"][0].get<std::string>();
}

void write_folder_atomic(const ckpt::OutputFolder& destination,
                         const std::function<void(const std::string& tmp)>& write) {
  const std::string& out_dir = destination.path;
  TITAN_CHECK(!out_dir.empty(), "[hf export] the output folder is empty. HINT: set a path");
  // Checked again here, not only at startup: the folder may have changed during the run.
  const std::string problem = ckpt::output_folder_problem(destination);
  TITAN_CHECK(problem.empty(), "[hf export] ", problem);
  // "out/" and "out" are the same folder; the tmp name must sit beside it, not inside.
  std::string out = fs::path(out_dir).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  const std::string tmp = out + ".tmp." + std::to_string(::getpid());
  ckpt::remove_stale_tmp_folders(out);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  const fs::path parent = fs::path(out).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  TITAN_CHECK(fs::create_directory(tmp, ec), "[hf export] cannot create ", tmp, ": ",
              ec ? ec.message() : std::string("it already exists"), ". HINT: check that ", out,
              "'s parent folder is writable");
  try {
    write(tmp);
    commit_folder(tmp, out);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

std::string folder_tensor_name(const std::string& architecture, const std::string& name) {
  if (multimodal_text_architecture(architecture).empty() || !name.starts_with("model.")) return name;
  return "model.language_model." + name.substr(6);
}

void save_hf_folder(const nn::Decoder& model, const std::string& out_dir, const HfExportOptions& options) {
  if (!multimodal_text_architecture(options.architecture).empty()) {
    std::error_code ec;
    TITAN_CHECK(!options.source_dir.empty() && fs::exists(fs::path(options.source_dir) / "config.json", ec),
                "[hf export] a ", options.architecture, " export copies its vision tower from the folder the model ",
                "was imported from, but none is known (", options.source_dir.empty() ? "none given" : options.source_dir,
                "). HINT: export as ", multimodal_text_architecture(options.architecture), " (a text model)");
  }
  TITAN_CHECK(options.dtype == "float32" || options.dtype == "bfloat16", "[hf export] dtype '", options.dtype,
              "' is not float32 or bfloat16. HINT: checkpoint.export_dtype=float32|bfloat16");
  TITAN_CHECK(options.max_shard_bytes > 0, "[hf export] max shard size ", options.max_shard_bytes,
              " bytes must be > 0. HINT: checkpoint.max_shard_size=5GB");
  const ckpt::OutputFolder out{"output folder", out_dir, ckpt::FolderKind::hf_model, options.overwrite,
                               options.overwrite_flag};
  write_folder_atomic(out, [&](const std::string& tmp) { write_folder(model, tmp, options); });
  log_info(str("[hf export] wrote ", out_dir, " (", options.dtype, ")"));
}

}  // namespace titan::models
