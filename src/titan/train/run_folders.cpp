#include "titan/train/run_folders.h"

#include <filesystem>

#include "titan/checkpoint/gguf.h"
#include "titan/config/config_error.h"
#include "titan/core/abbreviate.h"
#include "titan/core/clock.h"
#include "titan/core/log.h"

namespace titan::train {
namespace {

namespace fs = std::filesystem;

// What a run's exports may never replace or hold: its sources (written nowhere, nothing inside
// them) and its own folders (outputs may go inside them).
std::vector<ckpt::GuardedFolder> run_folders(const config::JobConfig& c) {
  return {{"model.hf_assets_path", c.model.hf_assets_path, false},
          {"checkpoint.initial_load_path", c.checkpoint.initial_load_path, false},
          {"training.dataset_path", c.training.dataset_path, false},
          {"validation.dataset_path", c.validation.enable ? c.validation.dataset_path : "", false},
          {"job.dump_folder", c.job.dump_folder, true},
          {"checkpoint.folder", checkpoint_folder(c), true}};
}

}  // namespace

ckpt::OutputFolder hf_export_folder(const config::JobConfig& c) {
  return {"checkpoint.last_save_in_hf's folder", (fs::path(checkpoint_folder(c)) / "hf").string(),
          ckpt::FolderKind::hf_model, c.checkpoint.last_save_in_hf_overwrite, "--checkpoint.last_save_in_hf_overwrite"};
}

ckpt::OutputFolder adapter_output(const config::JobConfig& c) {
  return {"lora.save_adapter", adapter_folder(c), ckpt::FolderKind::peft_adapter, c.lora.save_adapter_overwrite,
          "--lora.save_adapter_overwrite"};
}

std::string gguf_export_file(const config::JobConfig& c) {
  return (fs::path(checkpoint_folder(c)) / "model.gguf").string();
}

std::string adapter_folder(const config::JobConfig& c) {
  const fs::path dir(c.lora.save_adapter);
  return dir.is_absolute() ? dir.string() : (fs::path(c.job.dump_folder) / dir).string();
}

void check_output_folders(const config::JobConfig& c) {
  std::vector<ckpt::OutputFolder> outputs;
  if (c.checkpoint.last_save_in_hf) outputs.push_back(hf_export_folder(c));
  if (!c.lora.save_adapter.empty()) {
    if (fs::path(c.lora.save_adapter).is_relative() && !ckpt::folder_contains(c.job.dump_folder, adapter_folder(c))) {
      config::config_fail("lora.save_adapter='", abbreviate(c.lora.save_adapter), "' is relative but leads out of "
                          "job.dump_folder ", c.job.dump_folder, "; relative paths are inside it. HINT: pass an "
                          "absolute path for a folder elsewhere");
    }
    outputs.push_back(adapter_output(c));
  }
  for (const ckpt::OutputFolder& out : outputs) {
    const std::string problem = ckpt::output_folder_problem(out, run_folders(c));
    if (!problem.empty()) config::config_fail(problem);
  }
}

void check_checkpoint_folder_links(const config::JobConfig& c) {
  const fs::path relative(c.checkpoint.folder);
  if (relative.is_absolute()) return;  // the user named it: a link there is theirs to follow
  fs::path at(c.job.dump_folder);
  for (const fs::path& part : relative) {
    if (part.empty() || part == ".") continue;
    at /= part;
    std::error_code ec;
    if (fs::is_symlink(at, ec)) {
      config::config_fail("checkpoint.folder: ", at.string(), " is a symbolic link inside job.dump_folder; titan "
                          "writes, locks and prunes step folders there and will not follow a link out of the run's "
                          "folder. HINT: remove the link, or pass the target as an absolute --checkpoint.folder");
    }
  }
}

std::string checkpoint_folder(const config::JobConfig& c) {
  const fs::path f(c.checkpoint.folder);
  return f.is_absolute() ? f.string() : (fs::path(c.job.dump_folder) / f).string();
}

std::optional<ckpt::CheckpointEntry> find_resume_checkpoint(const config::JobConfig& c, bool primary) {
  if (!c.checkpoint.enable) return std::nullopt;
  const std::string folder = checkpoint_folder(c);
  std::error_code ec;
  if (fs::exists(folder, ec) && !fs::is_directory(folder, ec)) {
    config::config_fail("checkpoint.folder: ", folder, " is a file, so no checkpoint could be saved there; set "
                        "--checkpoint.folder (relative to job.dump_folder) to a folder");
  }
  if (primary) ckpt::remove_stale_checkpoint_dirs(folder);
  std::optional<ckpt::CheckpointEntry> e = ckpt::find_checkpoint(folder, c.checkpoint.load_step, false);
  // A model-only checkpoint (a final save) ends a run; continuing past it needs the newest full one.
  if (e && e->step < c.training.steps && ckpt::checkpoint_is_model_only(e->path)) {
    log_info(str("[checkpoint] ", e->path, " is model-only; continuing to step ", c.training.steps,
                 " needs optimizer state"));
    e = ckpt::find_checkpoint(folder, c.checkpoint.load_step, true);
  }
  return e;
}

void load_initial_hf(const config::JobConfig& c, const models::ModelSpec& spec, nn::Decoder& model) {
  const auto t0 = Clock::now();
  const fs::path from(c.checkpoint.initial_load_path);
  if (fs::exists(from / "manifest.json") && !fs::exists(from / "config.json")) {
    config::config_fail("checkpoint.initial_load_path: ", from.string(), " is a native titan checkpoint (manifest.json), "
                        "not a Hugging Face folder; drop --checkpoint.initial_load_in_hf to load it as one");
  }
  spec.hf.load_weights(model, c.checkpoint.initial_load_path);
  log_info(str("initial load from the ", ckpt::is_gguf_file(c.checkpoint.initial_load_path) ? "GGUF file " : "HF folder ",
               c.checkpoint.initial_load_path, " (weights) in ",
               seconds_since(t0), " s"));
}

}  // namespace titan::train
