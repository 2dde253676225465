// The checkpointer: one save and one restore path for every world size (a single rank is a world
// of one), for native checkpoints (checkpoint/train_state.md) and the Hugging Face folders a run
// starts from or ends with. It holds the sharding arithmetic: where each of this rank's tensors
// (whole parameters, FSDP pieces, TP slices) sits in its global parameter, which of them this rank
// writes, and how a checkpoint saved on any mesh is cut back into this rank's pieces.
//
//   before parallelize   find_resume_checkpoint (this run's own), load_initial_hf (when not resuming)
//   after the optimizer  Checkpointer ck(config, model, optimizer, loader); ck.load_at_start(resume)
//   each step            if (ck.due(step)) ck.save(step, tokens_seen)
//   end                  ck.finish() (the last async write), ck.export_hf() (last_save_in_hf)
//
// Saves are atomic (a tmp folder renamed into place). On one rank they may be written by a
// background thread from staging buffers (checkpoint.async_mode); multi-rank saves are collectives
// in which every rank writes its pieces (model-rank<r>-of-<w>.safetensors).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "titan/checkpoint/train_state.h"
#include "titan/config/job_config.h"
#include "titan/data/prefetch_loader.h"
#include "titan/models/decoder/parallelize.h"
#include "titan/train/run_folders.h"
#include "titan/train/optimizer.h"

namespace titan::train {

struct ResumePoint {
  int64_t step = 0;  // steps already done; the loop starts at step + 1
  int64_t tokens_seen = 0;
  bool resumed = false;  // continued this run's own checkpoint (metrics.jsonl is appended)
};


// Copies a checkpoint's weights into `params` by FQN. Every parameter must be there with its shape
// and nothing else: missing and unexpected names are listed in the error, which names `dir`.
void restore_model(const ckpt::TrainState& state, const nn::ParameterList& params, const std::string& dir);

// Where one of this rank's tensors sits in its global parameter: the TP slice (if any), then the
// flat range [start, start + numel) of it.
struct RestoreTarget {
  nn::Parameter* param = nullptr;
  ckpt::TensorPiece piece;
};

class Checkpointer {
 public:
  Checkpointer(const config::JobConfig& config, models::Parallelized& model, Optimizer& optimizer,
               data::PrefetchLoader& loader);
  ~Checkpointer();
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  // At start: `resume` (this run's own checkpoint) when there is one, else a native
  // checkpoint.initial_load_path, else nothing (fresh init, or an HF initial load already done).
  ResumePoint load_at_start(const std::optional<ckpt::CheckpointEntry>& resume);
  // Async saves: allocate (and fault in) the staging buffers now, so the first save stalls no
  // longer than later ones.
  void prepare(const ResumePoint& start);

  bool due(int64_t step) const;  // checkpoint.enable and an interval step or the last one
  void save(int64_t step, int64_t tokens_seen);
  void finish();     // waits for the last async write (re-throws its error)
  void export_hf();
  // checkpoint.last_save_in_gguf: <checkpoint folder>/model.gguf (a collective; LoRA merged)
  void export_gguf();  // checkpoint.last_save_in_hf: <checkpoint folder>/hf (a collective; LoRA merged)
  // lora.save_adapter: the adapters as a PEFT folder (a collective).
  void export_adapter();

 private:
  struct Staging;
  ckpt::TrainState capture(int64_t step, int64_t tokens_seen, bool model_only, bool staged);
  void check_same_lora_scale(const ckpt::TrainState& s, const std::string& path) const;  // exit 2 on another alpha
  void restore_weights(const ckpt::TrainState& s, const std::string& dir);
  void restore_training(const ckpt::TrainState& s, const std::string& dir);
  ResumePoint load_initial_native();

  const config::JobConfig& config_;
  models::Parallelized& model_;
  Optimizer& optimizer_;
  data::PrefetchLoader& loader_;
  std::vector<RestoreTarget> targets_;  // one per optimizer parameter, in its order
  std::vector<std::string> full_names_;  // every model parameter (all ranks' pieces together)
  std::vector<Shape> full_shapes_;       // ... and its global shape
  ckpt::CheckpointWriter writer_;
  std::unique_ptr<Staging> staging_;
};

}  // namespace titan::train
