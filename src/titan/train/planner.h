// titan plan: per-rank memory and communication of each valid (dp_shard, tp, ep) layout of a job,
// measured by running the job's model and step on the meta device (train/meta_plan.h) for each
// layout, as one rank of it per pipeline stage (the other ranks of a stage hold the same sizes: an
// FSDP shard, a TP share and an expert group are alike). Memory per rank, in bytes, as the
// allocator counts it (the metrics' memory field):
//   parameters  this rank's parameters, gradients and buffers once parallelized (whole on one rank;
//               its FSDP shard, TP share, experts and pipeline stages otherwise; a frozen LoRA base
//               whole, in its compute dtype)
//   optimizer   AdamW's moments for them
//   step        what the step adds at its peak: FSDP's gathered units, saved activations (as activation
//               checkpointing and the pipeline schedule leave them), the head's logits chunk, backward
//               temporaries, and whatever a plugin module allocates
//   total       the step's allocator peak (parameters + optimizer + step)
// Communication per step and rank: the bytes the step passes to collectives (the metrics' comm
// field), from the same run. A layout's numbers are those of its pipeline rank with the largest total.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/config/job_config.h"
#include "titan/models/model_spec.h"
#include "titan/nn/config_tree.h"

namespace titan::train {

struct LayoutPlan {
  int64_t dp_replicate = 1, dp_shard = 1, tp = 1, ep = 1, pp = 1;
  int64_t pp_rank = 0;   // the rank whose numbers these are (the one needing most memory)
  double bubble = 0;     // the schedule's ideal idle share (0 without a pipeline)
  double parameters = 0, optimizer = 0, step = 0;
  double total = 0;
  double comm_bytes = 0;        // per step per rank
  double all_to_all_bytes = 0;  // of comm_bytes: expert parallelism's exchange
  bool fits = true;
  std::string refused;  // non-empty: titan train refuses this layout (train/support.h, or its error)
};

// Every layout with pp x dp_replicate x dp_shard x tp = world (pp and dp_replicate as the config
// sets them) whose tp the family's parallel plan splits (and, with sequence parallelism, the
// micro-batch's tokens), and for a MoE model every ep dividing dp_shard and the experts (or the one
// parallelism.expert_parallel_degree names); tp, then ep ascending. `memory_per_rank` (bytes; 0 = no
// limit) decides `fits`.
std::vector<LayoutPlan> plan_layouts(const config::JobConfig& config, const models::ResolvedModel& model,
                                     const nn::ConfigTree& tree, int64_t world, double memory_per_rank);

// The seed's rule: shard first (tp = 1), add tensor parallelism only when a layout does not fit;
// the index of the first layout that fits and titan trains, -1 when none does.
int recommended_layout(const std::vector<LayoutPlan>& plans);

}  // namespace titan::train
