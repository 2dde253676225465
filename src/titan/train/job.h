// The job config turned into what each component of a run takes, in one place: the trainer, the
// checks before it, `titan plan` and the memory floor read these instead of translating config
// sections field by field (torchtitan's Configurable, in small steps: each component's typed config
// comes from one function here).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "titan/config/job_config.h"
#include "titan/models/decoder/parallelize.h"
#include "titan/models/model_spec.h"
#include "titan/nn/config_tree.h"
#include "titan/parallel/pipeline_schedule.h"
#include "titan/plugins/lora.h"
#include "titan/train/lr_schedule.h"
#include "titan/train/metrics.h"
#include "titan/train/optimizer.h"
#include "titan/train/muon.h"
#include "titan/train/precision.h"

namespace titan::train {

// The model a run trains and its family: the named size model.name (or model.hf_assets_path/
// config.json when empty), cut to model.n_layers, with the model.* mixture-of-experts fields
// overriding the spec's where set (torchtitan's moe_args); a training.seq_len (or validation.seq_len)
// past max_position_embeddings is refused; validated.
models::ResolvedModel resolve_model(const config::JobConfig& config);
inline nn::DecoderConfig model_config(const config::JobConfig& config) { return resolve_model(config).config; }

// The model's config tree with the job's overrides applied: the imported plugins'
// (overrides.imports) and LoRA's (lora.rank > 0; adapters matching no projection are a config error).
nn::ConfigTree job_tree(const config::JobConfig& config, const models::ResolvedModel& model);

// The whole model built from `tree` by its family (a LoRA base frozen in the compute dtype),
// checked for the training and validation batches, with activation checkpointing `recompute`;
// its values uninitialised (the trainer initialises or loads them; a meta run has none).
std::unique_ptr<nn::Decoder> build_job_model(const config::JobConfig& config, const models::ResolvedModel& model,
                                             const nn::ConfigTree& tree, const std::vector<nn::Recompute>& recompute,
                                             Precision param);

// "model 'debug'", or "the model of DIR/config.json" (an empty model.name): how errors name it.
std::string model_label(const config::JobConfig& config);

// The LoRA options of a config (lora.*; target_modules split at commas).
plugins::LoraOptions lora_options(const config::JobConfig& config);

// training.mixed_precision_param / _reduce, parsed once.
struct PrecisionConfig {
  Precision param = Precision::float32;   // what modules compute with (and MFU's peak)
  Precision reduce = Precision::float32;  // FSDP's gradient reduce-scatter
};
PrecisionConfig resolve_precision(const config::JobConfig& config);

// parallelism.pipeline_* for a model of `num_layers` layers and a local batch of `local_batch`
// rows: the schedule, the stages (the family's split-point names) and that the schedule takes the
// micro-batches; every impossible value a one-line config error (titan train and titan plan alike).
struct PipelineConfig {
  parallel::PipelineScheduleKind schedule = parallel::PipelineScheduleKind::one_f_one_b;
  parallel::PipelineLayout layout;  // pp = 1: no pipeline
  int64_t micro_rows = 1;           // rows per pipeline micro-batch
};
PipelineConfig resolve_pipeline(const config::ParallelismSection& parallelism, int64_t num_layers,
                                int64_t local_batch);

// The options of parallelize; under TP each rank's share is built as build_job_model builds the
// whole model (the job's tree, LoRA's frozen base, `recompute`).
models::ParallelizeOptions parallelize_options(const config::JobConfig& config, const PrecisionConfig& precision,
                                               const PipelineConfig& pipeline, const models::ResolvedModel& model,
                                               const std::vector<nn::Recompute>& recompute);
AdamWConfig adamw_config(const config::JobConfig& config);
// The parameters optimizer.muon_params selects among `params` (FQN, global shape), in their order:
// auto takes every 2-D weight of the transformer blocks (layers.*) and their stacked [experts, out,
// in] weights; globs must each match, and what they match must be a matrix Muon can take (not an
// embedding, the head, a norm, a bias or a convolution): else a one-line config error.
std::vector<std::pair<std::string, Shape>> muon_matrices(const std::string& spec,
                                                         const std::vector<std::pair<std::string, Shape>>& params);
// The optimizer optimizer.name names over this rank's pieces of `model`: AdamW, or Muon for
// muon_matrices (assembled over the mesh's replica group) and AdamW for the rest.
std::unique_ptr<Optimizer> make_optimizer(const config::JobConfig& config, models::Parallelized& model);
LrScheduleConfig lr_schedule_config(const config::JobConfig& config);
MetricsOptions metrics_options(const config::JobConfig& config, const std::string& config_name);

// `f()`, its titan::Error rethrown as a config error (exit 2): the mesh and the TP split are the
// job config's mistakes, whichever layer finds them.
template <class F>
auto as_config_error(F&& f) {
  try {
    return f();
  } catch (const config::ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw config::ConfigError(e.what());
  }
}

}  // namespace titan::train
