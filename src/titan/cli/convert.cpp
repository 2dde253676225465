// titan convert: between a native checkpoint (a step-<N> folder, checkpoint/train_state.h) and a
// Hugging Face folder (config.json + safetensors), offline.
//   native -> HF      the model is rebuilt from the checkpoint's config.toml (model.name, or
//                     model.hf_assets_path/config.json when the name is empty; model.n_layers), its
//                     weights copied in, and written by save_hf_folder (dtype, shard size, tokenizer
//                     files from --tokenizer or the run's model.hf_assets_path).
//   HF -> native      the folder's model is loaded (every shape checked, missing/unexpected keys
//                     listed) and saved as a model-only checkpoint <to>/step-0, ready for
//                     --checkpoint.initial_load_path <to>/step-0.
//   GGUF -> HF        a GGUF file (llama.cpp, Ollama) as the HF folder it stands for: config.json,
//                     the tokenizer rebuilt from its metadata, its tensors dequantized
//                     (models/decoder/gguf_model.h).
//   any -> GGUF       --to-gguf FILE: the model (a native checkpoint, an HF folder or a GGUF) as one
//                     GGUF file, --dtype f32 | f16 | bf16 | q8_0, the tokenizer from --tokenizer,
//                     the HF folder itself or the run's model.hf_assets_path.
// The direction follows --from (a folder with manifest.json is native, one with config.json is HF);
// --to-hf / --to-native make it explicit and are checked against it. A folder holding exactly one
// step folder (what --to-native writes) stands for it.
// Data safety: --to may not be --from or inside it, and a non-empty --to must be a previous output
// of the same direction (an HF folder; a folder of step-<N> folders) unless --overwrite.
#include <cstdio>
#include <filesystem>

#include <cstdlib>

#include "titan/checkpoint/gguf.h"
#include "titan/checkpoint/hf_folder.h"
#include "titan/checkpoint/output_folder.h"
#include "titan/checkpoint/train_state.h"
#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/config/overrides.h"
#include "titan/config/validate.h"
#include "titan/core/log.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/gguf_model.h"
#include "titan/models/decoder/hf_checkpoint.h"
#include "titan/nn/parameter.h"
#include "titan/train/trainer.h"

namespace titan::cli {
namespace {

namespace fs = std::filesystem;

// The model of a native checkpoint (refusing a LoRA one, which holds the adapters only), and where
// its run's tokenizer and initial weights came from.
struct NativeModel {
  std::unique_ptr<nn::Decoder> model;
  const models::ModelSpec* spec = nullptr;
  std::string assets_dir, source;
  int64_t step = 0;
};

NativeModel load_native(const std::string& from) {
  const ckpt::TrainState state = ckpt::load_train_state(from, /*model_only=*/true);
  config::JobConfig c;
  config::apply_toml_text(c, state.config_toml, from + "/config.toml");
  TITAN_CHECK(c.lora.rank == 0, "[convert] ", from, " is a LoRA checkpoint: it holds the adapters only (the frozen "
              "base is ", c.checkpoint.initial_load_path.empty() ? std::string("the seeded init") : c.checkpoint.initial_load_path,
              "). HINT: rerun the run with --checkpoint.last_save_in_hf or --checkpoint.last_save_in_gguf (the merged "
              "model) or --lora.save_adapter DIR (a PEFT adapter)");
  const models::ResolvedModel resolved = train::resolve_model(c);
  NativeModel out;
  out.model = models::build_model(*resolved.spec, resolved.config);
  train::restore_model(state, out.model->state(), from);
  out.spec = resolved.spec;
  out.assets_dir = c.model.hf_assets_path;
  out.source = c.checkpoint.initial_load_in_hf ? c.checkpoint.initial_load_path : c.model.hf_assets_path;
  out.step = state.step;
  return out;
}

void native_to_hf(const std::string& from, const std::string& to, const models::HfExportOptions& base) {
  const NativeModel native = load_native(from);
  models::HfExportOptions options = base;
  if (options.tokenizer_dir.empty() && !native.assets_dir.empty() &&
      fs::exists(fs::path(native.assets_dir) / "tokenizer.json")) {
    options.tokenizer_dir = native.assets_dir;
  }
  native.spec->hf.save_folder(*native.model, to, options);
  log_info(str("converted native checkpoint ", from, " (step ", native.step, ") -> HF folder ", to));
}

void gguf_to_hf(const std::string& from, const std::string& to, models::HfExportOptions options) {
  std::string assets;
  const std::shared_ptr<void> lease = models::GgufModel::open(from)->write_temp_assets(&assets);
  const models::ModelSpec& spec = models::family_of_hf_folder(assets);
  const std::unique_ptr<nn::Decoder> model = models::load_hf_model(spec, from);
  if (options.tokenizer_dir.empty()) options.tokenizer_dir = assets;
  spec.hf.save_folder(*model, to, options);
  log_info(str("converted GGUF ", from, " -> HF folder ", to));
}

void to_gguf(const std::string& from, bool is_native, bool is_gguf, const std::string& out,
             models::GgufExportOptions options) {
  std::unique_ptr<nn::Decoder> model;
  std::string tokenizer_dir, source;
  std::shared_ptr<void> lease;  // a GGUF's temporary assets folder
  if (is_native) {
    NativeModel native = load_native(from);
    model = std::move(native.model);
    tokenizer_dir = native.assets_dir;
    source = native.source;
  } else if (is_gguf) {
    lease = models::GgufModel::open(from)->write_temp_assets(&tokenizer_dir);
    model = models::load_hf_model(models::family_of_hf_folder(tokenizer_dir), from);
  } else {
    // A folder of bf16 weights builds a frozen bf16 model whose weights are the mapped files' bytes
    // (no f32 copy, no zero-filled model; models/decoder/weights.cpp's maps_file).
    const ckpt::HfWeights weights = ckpt::HfWeights::open(from);
    bool bf16 = true;
    for (const std::string& name : weights.names()) bf16 = bf16 && weights.find(name)->dtype == DType::bf16;
    const nn::FrozenParameterScope frozen(bf16 ? DType::bf16 : DType::f32);
    model = models::load_hf_model(models::family_of_hf_folder(from), from);
    tokenizer_dir = source = from;
  }
  if (options.tokenizer_dir.empty()) options.tokenizer_dir = tokenizer_dir;
  if (!source.empty() && fs::exists(fs::path(source) / "config.json")) {
    options.architecture = models::hf_architecture(source);
    options.source_dir = source;
  }
  models::save_gguf(*model, out, options);
  log_info(str("converted ", from, " -> GGUF ", out, " (", options.dtype, ")"));
}

void hf_to_native(const std::string& from, const std::string& to) {
  const models::ModelSpec& spec = models::family_of_hf_folder(from);
  const std::unique_ptr<nn::Decoder> loaded = models::load_hf_model(spec, from);
  nn::Decoder& model = *loaded;
  config::JobConfig c;
  c.model.name = "";
  c.model.hf_assets_path = from;
  ckpt::TrainState state;
  state.config_toml = config::to_toml(c);
  for (nn::Parameter* p : model.parameters()) state.model.emplace_back(p->fqn, p->value);
  const std::string dir = ckpt::save_train_state(to, state);
  log_info(str("converted HF folder ", from, " -> native checkpoint ", dir,
               " (model only; use --checkpoint.initial_load_path ", dir, ")"));
}

// Data safety before any work (checkpoint/output_folder.h, the rule every folder writer follows):
// --to is not --from, inside it or holding it, and a non-empty --to is replaced only when it is a
// previous output of this direction, or with --overwrite.
void check_destination(const std::string& from, const std::string& to, bool to_hf, bool overwrite) {
  const ckpt::OutputFolder out{"--to", to, to_hf ? ckpt::FolderKind::hf_model : ckpt::FolderKind::checkpoints,
                               overwrite, "--overwrite"};
  const std::string problem = ckpt::output_folder_problem(out, {{"--from", from, false}});
  if (!problem.empty()) throw UsageError("titan convert: " + problem);
}

// A checkpoint folder holding exactly one step folder stands for that step (what --to-native
// writes: DIR/step-0).
fs::path resolve_from(const fs::path& from) {
  if (fs::exists(from / "manifest.json") || fs::exists(from / "config.json")) return from;
  std::vector<fs::path> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(from, ec)) {
    if (e.is_directory() && e.path().filename().string().starts_with("step-") && fs::exists(e.path() / "manifest.json")) {
      steps.push_back(e.path());
    }
  }
  if (steps.size() != 1) return from;
  log_info(str("[convert] ", from.string(), " holds one checkpoint: converting ", steps[0].string()));
  return steps[0];
}

}  // namespace

int run_convert(int argc, char** argv) {
  const Args args("convert",
                  {{"from", "a native checkpoint (step-<N> folder) or a Hugging Face folder", "", false, true},
                   {"to", "output: an HF folder (native or GGUF -> HF) or a checkpoint folder (HF -> native)", ""},
                  {"to-gguf", "output: one GGUF file (llama.cpp, Ollama) of the model in --from", ""},
                  {"name", "GGUF general.name (default: the output file's name without .gguf)", ""},
                   {"to-hf", "convert a native checkpoint to a Hugging Face folder", "", true},
                   {"to-native", "convert a Hugging Face folder to a native checkpoint", "", true},
                   {"dtype", "HF export: float32 | bfloat16 (default float32); GGUF: f32 | f16 | bf16 | q8_0 (default f16)", ""},
                   {"max-shard-size", "largest safetensors shard of the HF export (5GB, 500MB, ...)", "5GB"},
                   {"tokenizer", "folder whose tokenizer files go into the HF export (default: the run's)", ""},
                   {"overwrite", "replace a non-empty --to that is not a previous output of this direction", "", true}},
                  argc, argv, 2);
  if (args.help_requested()) {
    std::fputs(args.usage().c_str(), stdout);
    return 0;
  }
  const std::string to = args.get("to"), to_gguf_path = args.get("to-gguf");
  if (to.empty() == to_gguf_path.empty()) throw UsageError("titan convert: pass --to DIR or --to-gguf FILE (one of them)");
  const bool from_gguf = ckpt::is_gguf_file(args.get("from"));
  TITAN_CHECK(from_gguf || fs::is_directory(args.get("from")), "[convert] --from ", args.get("from"), " is neither a "
              "folder nor a GGUF file. HINT: pass a step-<N> folder (or a checkpoint folder holding one), a Hugging Face "
              "model folder or a .gguf file");
  const std::string from = from_gguf ? args.get("from") : resolve_from(args.get("from")).string();
  if (!to_gguf_path.empty()) {
    models::GgufExportOptions options;
    options.dtype = args.get("dtype").empty() ? "f16" : args.get("dtype");
    if (options.dtype != "f32" && options.dtype != "f16" && options.dtype != "bf16" && options.dtype != "q8_0") {
      throw UsageError(str("titan convert --to-gguf: --dtype ", options.dtype, " is not f32, f16, bf16 or q8_0"));
    }
    options.tokenizer_dir = args.get("tokenizer");
    options.overwrite = args.get_bool("overwrite");
    options.name = args.get("name");
    std::error_code ec;
    const fs::path out = fs::weakly_canonical(to_gguf_path, ec), src = fs::weakly_canonical(from, ec);
    if (out == src || ckpt::folder_contains(src.string(), out.string())) {
      throw UsageError(str("titan convert: --to-gguf ", to_gguf_path, " is --from or inside it; choose a path outside"));
    }
    to_gguf(from, fs::exists(fs::path(from) / "manifest.json"), from_gguf, to_gguf_path, options);
    return 0;
  }
  if (from_gguf) {
    if (args.get_bool("to-native")) throw UsageError("titan convert --to-native: --from is a GGUF file; convert it --to an HF folder first");
    check_destination(from, to, true, args.get_bool("overwrite"));
    models::HfExportOptions options;
    options.dtype = args.get("dtype").empty() ? "float32" : args.get("dtype");
    if (options.dtype != "float32" && options.dtype != "bfloat16") {
      throw UsageError(str("titan convert: --dtype ", options.dtype, " is not float32 or bfloat16"));
    }
    options.max_shard_bytes = config::parse_byte_size(args.get("max-shard-size"));
    options.tokenizer_dir = args.get("tokenizer");
    options.overwrite = args.get_bool("overwrite");
    gguf_to_hf(from, to, options);
    return 0;
  }
  const bool is_native = fs::exists(fs::path(from) / "manifest.json");
  const bool is_hf = fs::exists(fs::path(from) / "config.json");
  if (!is_native && !is_hf) {
    throw UsageError(str("titan convert: ", from, " holds neither manifest.json (a native checkpoint) nor "
                         "config.json (a Hugging Face folder)"));
  }
  if (args.get_bool("to-hf") && args.get_bool("to-native")) throw UsageError("titan convert: --to-hf or --to-native, not both");
  if (args.get_bool("to-hf") && !is_native) {
    throw UsageError(str("titan convert --to-hf: ", from, " is not a native checkpoint (no manifest.json)"));
  }
  if (args.get_bool("to-native") && !is_hf) {
    throw UsageError(str("titan convert --to-native: ", from, " is not a Hugging Face folder (no config.json)"));
  }
  models::HfExportOptions options;
  options.dtype = args.get("dtype").empty() ? "float32" : args.get("dtype");
  if (options.dtype != "float32" && options.dtype != "bfloat16") {
    throw UsageError(str("titan convert: --dtype ", options.dtype, " is not float32 or bfloat16"));
  }
  options.max_shard_bytes = config::parse_byte_size(args.get("max-shard-size"));
  if (options.max_shard_bytes <= 0) {
    throw UsageError(str("titan convert: --max-shard-size ", args.get("max-shard-size"), " is not a size (e.g. 5GB)"));
  }
  options.tokenizer_dir = args.get("tokenizer");
  check_destination(from, to, is_native, args.get_bool("overwrite"));
  options.overwrite = args.get_bool("overwrite");
  options.overwrite_flag = "--overwrite";
  if (is_native) {
    native_to_hf(from, to, options);
  } else {
    hf_to_native(from, to);
  }
  return 0;
}

}  // namespace titan::cli
