// Trainer: one training run from a resolved JobConfig (config/job_config.h), in torchtitan's
// three parts:
//
//   setup()             the mesh and every check that can fail on bad input (config, model, plugin
//                       shape constraints, tokenizer), then the dump folder (config.toml = the
//                       resolved config), data (every rank reads the global batch's stream and keeps
//                       its rows), the model (its family's build and init, an HF import, then
//                       parallelize: TP share, FSDP), AdamW, the LR schedule, a resume. A setup that
//                       fails removes the folders it created (its lock and config.toml in them).
//   train_step(step)    the step's micro-batches (local_batch_size x seq_len each), forward_backward
//                       on each, gradients made global (parallelize), clipping (the logged
//                       grad_norm is the norm before clipping), lr = optimizer.lr x schedule(step),
//                       AdamW, the model's post-step hooks, the metric line, a validation pass when
//                       due (train/validator.h: every validation.freq steps and after the last),
//                       a checkpoint when due.
//   run_step()          the step's computation (below): each micro-batch's gradients scaled by
//                       1 / (target tokens of the whole step), so the step's gradient is that of the
//                       mean loss over the global batch.
//
// The trainer names no model feature. The model returns named loss terms (nn/loss_terms.h), which
// the trainer turns into the step's loss by one rule (run_step), reports its own step metrics
// (models::Parallelized::step_metrics), which the metric writers write as given, and registers its
// own post-step hooks (Parallelized::post_step), which the trainer runs after each update.
//
// A non-finite loss or gradient stops the run with an Error naming the step (and the first
// parameter whose gradient is non-finite). Checkpoints: train/checkpointer.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "titan/config/job_config.h"
#include "titan/data/prefetch_loader.h"
#include "titan/models/model_spec.h"
#include "titan/nn/config_tree.h"
#include "titan/nn/lora.h"
#include "titan/train/checkpointer.h"
#include "titan/train/job.h"
#include "titan/train/lr_schedule.h"
#include "titan/train/metrics.h"
#include "titan/train/optimizer.h"
#include "titan/train/peak_flops.h"
#include "titan/train/run_lock.h"
#include "titan/train/validator.h"

namespace titan::train {

struct TrainSummary {
  std::vector<StepMetrics> steps;  // every step, in order
  std::vector<ValidationMetrics> validations;  // every validation pass, in order
  double seconds = 0.0;            // wall time of the loop (setup excluded)
};

class Trainer {
 public:
  // `config` is validated in setup(); `config_name` is the registered function it came from.
  Trainer(const config::JobConfig& config, std::string config_name);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void setup();
  // Runs the steps after the resumed one to training.steps, then the final export.
  TrainSummary train();
  StepMetrics train_step(int64_t step);
  // The denominator of a per-forward loss term (nn::LossDenominator::forwards): the step's forwards,
  // micro-batches x data-parallel ranks x a pipeline's micro-batches.
  int64_t forwards_per_step() const;

 private:
  void setup_run();  // setup() after the mesh; a failure removes the folders it created
  void setup_mesh();
  void check_model();                        // the config tree, overrides, every shape constraint
  void check_memory(bool measured) const;  // the memory floor against what is available
  int agreed_stop_signal() const;            // SIGINT/SIGTERM on any rank, after a step; else 0
  void check_pipeline();                     // the pipeline's stages and schedule (no-op without one)
  std::unique_ptr<nn::Decoder> build_model();  // the whole model from the tree, shapes checked
  void setup_data();
  void setup_validation();  // the validation set checked before step 1 (no-op when disabled)
  void log_setup() const;
  int64_t next_micro_batches(int64_t step);  // fills micro_; returns the step's target count
  void check_finite(int64_t step, double loss, double grad_norm) const;

  const config::JobConfig& c_;
  std::string config_name_;
  parallel::Comm* world_ = nullptr;
  std::unique_ptr<parallel::DeviceMesh> mesh_;
  int64_t dp_ = 1, dp_rank_ = 0, accumulation_ = 1, B_ = 0, T_ = 0;
  models::ResolvedModel resolved_;
  std::vector<nn::Recompute> recompute_;  // activation checkpointing, per layer
  PrecisionConfig precision_;
  PipelineConfig pipeline_;  // pipeline_parallel_degree > 1 only
  nn::ConfigTree tree_;  // the model's config tree, override replacements applied (outlives the model)
  std::unique_ptr<RunLock> run_lock_;  // rank 0: this run owns job.dump_folder
  std::unique_ptr<RunLock> checkpoint_lock_;  // and a checkpoint.folder outside it
  std::unique_ptr<data::Tokenizer> tokenizer_;
  data::LoaderConfig loader_config_;
  std::unique_ptr<data::PrefetchLoader> loader_;
  std::unique_ptr<Validator> validator_;  // null unless validation.enable
  int64_t val_B_ = 0, val_T_ = 0;         // validation batch rows per rank and sequence length
  std::unique_ptr<models::Parallelized> model_;
  std::unique_ptr<Optimizer> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<MetricsLogger> metrics_;
  ResumePoint start_;
  double flops_per_token_ = 0.0, memory_total_ = 0.0;
  PeakFlops peak_;
  std::vector<data::Batch> micro_;
  int64_t tokens_seen_ = 0;
  int64_t trainable_params_ = 0;  // all of them, or the LoRA adapters
};

// The computation of one step, the trainer's and a meta run's (train/meta_plan.h): zero_grad, each
// micro-batch's forward_backward (per-target loss terms' gradients scaled by 1 / targets,
// per-forward terms' by 1 / forwards_per_step), finish_grads, the loss (each term's global sum over
// its denominator, weighted into the total; nn/loss_terms.h), clipping to max_norm (grad_norm is
// the norm before), then the optimizer's update at lr_for(the totals) (which may throw: a
// non-finite step). The caller runs the model's post_step after it.
// `dropout`, when set, keys the LoRA dropout masks: its micro field is set to each micro-batch's
// index around that micro-batch's forward_backward, and the key is unset after.
struct StepTotals {
  std::vector<nn::LossValue> terms;  // each loss term's value for the step, in the model's order
  double loss = 0.0;                 // sum over the terms of weight x value
  double grad_norm = 0.0;
};
StepTotals run_step(models::Parallelized& model, Optimizer& optimizer, const std::vector<data::Batch>& micro,
                    int64_t targets, int64_t forwards_per_step, double max_norm,
                    const std::function<double(const StepTotals&)>& lr_for,
                    std::optional<nn::LoraDropoutKey> dropout = std::nullopt);

// Trainer(config, config_name): setup(), then train(). Throws titan::Error for bad input and for
// a non-finite loss or gradient.
TrainSummary run_training(const config::JobConfig& config, const std::string& config_name);

}  // namespace titan::train
