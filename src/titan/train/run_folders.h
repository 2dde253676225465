// The folders a run reads from and writes to, outside the checkpoint format itself: where its
// checkpoints and adapter go, the rule its end-of-run outputs follow (checkpoint/output_folder.h:
// never replace what titan did not write, never a source of the run), the checkpoint it resumes, and
// the HF folder it starts from.
#pragma once

#include <optional>
#include <string>

#include "titan/checkpoint/output_folder.h"
#include "titan/checkpoint/train_state.h"
#include "titan/config/job_config.h"
#include "titan/models/model_spec.h"

namespace titan::train {

// A relative checkpoint.folder must not pass through a symbolic link planted under job.dump_folder
// (its step folders, lock and pruning would land in the link's target): ConfigError otherwise.
void check_checkpoint_folder_links(const config::JobConfig& config);

// checkpoint.folder, relative to job.dump_folder unless absolute.
std::string checkpoint_folder(const config::JobConfig& config);

// lora.save_adapter: absolute, or relative to job.dump_folder.
std::string adapter_folder(const config::JobConfig& config);
// checkpoint.last_save_in_gguf's file: <checkpoint folder>/model.gguf.
std::string gguf_export_file(const config::JobConfig& config);

// Before any work: the folders the run replaces at its end (checkpoint.last_save_in_hf's
// <checkpoint folder>/hf, lora.save_adapter) follow checkpoint/output_folder.h's rule, and a
// relative lora.save_adapter stays inside job.dump_folder; a ConfigError (exit 2) otherwise.
void check_output_folders(const config::JobConfig& config);

// This run's own newest valid checkpoint (or checkpoint.load_step), when checkpointing is on and
// there is one. `primary` (world rank 0) also removes tmp folders that dead runs left.
std::optional<ckpt::CheckpointEntry> find_resume_checkpoint(const config::JobConfig& config, bool primary);

// checkpoint.initial_load_in_hf: the HF folder's weights into the whole model (every shape
// checked, missing and unexpected keys listed). Weights only: the run starts at step 1.
void load_initial_hf(const config::JobConfig& config, const models::ModelSpec& spec, nn::Decoder& model);

// The end-of-run outputs as checkpoint/output_folder.h sees them: <checkpoint folder>/hf
// (checkpoint.last_save_in_hf) and lora.save_adapter, each with its overwrite flag.
ckpt::OutputFolder hf_export_folder(const config::JobConfig& config);
ckpt::OutputFolder adapter_output(const config::JobConfig& config);

}  // namespace titan::train
