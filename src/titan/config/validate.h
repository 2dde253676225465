// validate(): the one check of a resolved JobConfig, before step 1 (STYLE.md "check at the
// boundary, once"). Each impossible value or combination is a ConfigError of one line: the field
// and its value, what is allowed, and the fix. Combinations of features that are possible but not
// run yet (LoRA with TP, EP with PP, ...) are the support matrix's (train/support.h).
//
// Conventions it enforces (the trainer relies on them):
//   training.max_norm <= 0 disables gradient clipping (any positive value clips to that norm);
//   training.global_batch_size -1 means local_batch_size x data-parallel degree (no accumulation);
//   lr_scheduler.decay_ratio -1 means "decay over every step after warmup".
#pragma once

#include <cstdint>

#include "titan/config/job_config.h"

namespace titan::config {

// data_parallel_degree: the number of data-parallel ranks the run actually has (>= 1).
void validate(const JobConfig& config, int64_t data_parallel_degree);

// Micro-batches per optimizer step: 1 when global_batch_size is -1, else
// global_batch_size / (local_batch_size x data_parallel_degree). ConfigError when that is not a
// positive whole number (the same message as validate()).
// "5GB" (10^9), "500MB", "2GiB" (2^30), "123" bytes, case-insensitive; -1 when it is not a size.
int64_t parse_byte_size(const std::string& text);

int64_t accumulation_steps(const JobConfig& config, int64_t data_parallel_degree);

// optimizer.name names Muon (names are case-insensitive: AdamW, adamw; Muon, muon).
bool uses_muon(const OptimizerSection& optimizer);

// parallelism.expert_parallel_degree against the resolved mesh: ep >= 1 must divide dp_shard (it
// borrows those ranks); then against the model (num_experts 0: a dense model): it needs experts, and
// ep must divide their number. ConfigError otherwise. The combinations with other features that
// do not run yet are train/support.h's.
void validate_expert_parallel_mesh(const JobConfig& config, int64_t dp_shard);
void validate_expert_parallel_model(const JobConfig& config, int64_t num_experts);

}  // namespace titan::config
