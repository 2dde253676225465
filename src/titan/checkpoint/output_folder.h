// The one rule for every writer of a whole folder (titan convert's --to, checkpoint.last_save_in_hf,
// lora.save_adapter): a folder is built beside its destination and swapped in whole, and the old
// one is deleted, so the destination must be something titan may delete. It may be
//   - absent or empty, or
//   - an earlier output of the same kind (an HF model folder, a PEFT adapter folder, a folder of
//     step-<N> checkpoints), or anything at all when the user passed the overwrite flag;
// and it may never be a source the job reads (--from, the base model's folder, a dataset), lie
// inside one or hold one, nor be a folder of the run (job.dump_folder, checkpoint.folder) or a
// parent of one; writing inside the run's folders is fine.
#pragma once

#include <string>
#include <vector>

namespace titan::ckpt {

enum class FolderKind { hf_model, peft_adapter, checkpoints };

// "a Hugging Face model folder", "a PEFT adapter folder", "a checkpoint folder of step-<N> folders".
const char* folder_kind_name(FolderKind kind);

// Whether `dir` holds only what an output of `kind` holds (the kind's files, and its marker file:
// config.json + safetensors, adapter_config.json, step-<N> folders).
bool is_folder_output_of(const std::string& dir, FolderKind kind);

struct OutputFolder {
  std::string flag;  // how the user named it, for messages: "--to", "lora.save_adapter"
  std::string path;
  FolderKind kind = FolderKind::hf_model;
  bool overwrite = false;          // replace a non-empty folder of another kind
  std::string overwrite_flag = "--overwrite";  // what the user passes for `overwrite`
};

struct GuardedFolder {
  std::string flag;  // "--from", "model.hf_assets_path", "job.dump_folder"
  std::string path;  // empty: none (skipped)
  // false: a source (never written, never held, nothing written inside it); true: a folder of the
  // run (never replaced, never held, outputs may go inside it).
  bool outputs_inside = false;
};

// Whether `path` is `folder` or inside it, symbolic links resolved (as far as they exist).
bool folder_contains(const std::string& folder, const std::string& path);

// "" when `out` may be written (and replaced) as the rule above says; else why not, as one line
// naming the paths and the fix (the caller adds its tag and its error type). `guarded` folders
// are compared after resolving symbolic links.
std::string output_folder_problem(const OutputFolder& out, const std::vector<GuardedFolder>& guarded = {});

// A folder writer builds "<out>.tmp.<pid>" beside `out` (and may move the old one to
// "<out>.tmp.<pid>.old"); a kill -9 leaves them. Removes those whose process is gone (a live
// one is another writer's), as a step-folder save's leftovers are; returns how many.
int remove_stale_tmp_folders(const std::string& out);

}  // namespace titan::ckpt
