// Trainer: one training run from a resolved JobConfig (config/job_config.h).
//
//   setup   dump folder (config.toml = the resolved config), tokenizer (model.hf_assets_path),
//           data (PrefetchLoader over training.dataset_path or a built-in dataset), model (a named
//           spec, model.n_layers to cut its depth; random init from training.seed), AdamW, schedule.
//   step    accumulation_steps micro-batches of local_batch_size x seq_len: forward+backward each,
//           gradients scaled by 1 / (predicted tokens of the whole step), so the step's gradient is
//           that of the mean loss over every token of the global batch; then clip (the logged
//           grad_norm is the norm before clipping), lr = optimizer.lr x schedule(step), AdamW.
//   stop    a non-finite loss or gradient stops the run with an Error naming the step (and the
//           first parameter whose gradient is non-finite).
//   ckpt    checkpoint.enable: resume from the newest valid <checkpoint.folder>/step-<N> (model,
//           AdamW moments, data cursor, step, tokens seen; the loop continues at N+1 and appends to
//           metrics.jsonl), else checkpoint.initial_load_path; save every checkpoint.interval steps
//           and at the end, on this thread or a background one (checkpoint/train_state.md).
//   output  a console line every metrics.log_freq steps (and step 1), JSONL / TensorBoard at the
//           same steps, and loss.svg over every step at the end (metrics.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/checkpoint/train_state.h"
#include "titan/config/job_config.h"
#include "titan/nn/decoder.h"
#include "titan/train/metrics.h"

namespace titan::train {

struct TrainSummary {
  std::vector<StepMetrics> steps;  // every step, in order
  double seconds = 0.0;            // wall time of the loop (setup excluded)
};

// The model a run trains: the spec model.name (or model.hf_assets_path/config.json when empty),
// cut to model.n_layers, with the model.* mixture-of-experts fields overriding the spec's where
// set (torchtitan's moe_args), max_seq_len raised to training.seq_len; validated.
nn::DecoderConfig model_config(const config::JobConfig& config);

// Copies a checkpoint's weights into `params` by FQN. Every parameter must be there with its shape
// and nothing else: missing and unexpected names are listed in the error, which names `dir`.
void restore_model(const ckpt::TrainState& state, const nn::ParameterList& params, const std::string& dir);

// Runs `config` (already validated) to the end. `config_name` is the registered function it came
// from, for the logs. Throws titan::Error for bad input and for a non-finite loss or gradient.
TrainSummary run_training(const config::JobConfig& config, const std::string& config_name);

}  // namespace titan::train
