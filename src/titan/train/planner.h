// titan plan: per-rank memory and communication of each valid (dp_shard, tp) layout of a job,
// predicted from the model's sizes and what titan's modules hold (no run needed). Memory per
// rank, in bytes:
//   parameters / gradients / optimizer   4 / 4 / 8 bytes per element of this rank's FSDP shard
//                                        (whole, tp-local parameters on a single rank)
//   gathered      FSDP's full units while in use: the root (embedding, final norm, head) values and
//                 gradients for the whole micro-batch, a block's values + gradients + the next
//                 block's prefetched values (3 blocks' worth of floats)
//   activations   what every module saves for backward, per token and layer, as activation
//                 checkpointing leaves it (see planner.cpp)
//   logits        the fused head's [chunk, V / tp] fp32 buffer
//   transient     the largest backward temporaries (a block's gradient buffers)
//   total         everything but logits and transient, plus the larger of the two (the head's
//                 chunk is freed before the first block's backward starts)
// Communication per step and rank counts what titan passes to collectives (full unit size for
// all-gathers and reduce-scatters, as the metrics' comm field does).
// Mixture-of-experts models (tp = 1) take their parameter count from the model (router and every
// expert) and a MoE layer's activations from what the MoE block saves (planner.cpp); with expert parallelism (ep > 1) each rank holds E / ep experts whole (16 bytes per
// element, outside FSDP, all-reduced over the other dp ranks holding them), FSDP shards the rest,
// the MoE blocks keep the rows they received for backward (D floats per routed pair) and each MoE
// layer moves every routed pair's row out and back in forward and backward (all_to_all_bytes:
// sent plus received, at balanced load).
// (Expert parallelism is not planned together with a pipeline: validate refuses the pair.)
// With a pipeline (pp > 1) each rank holds its stages' layers (and the embedding, or the norm and
// head) and is planned on its own: activations are the peak of the schedule's live (stage,
// micro-batch) slots as the rank runs its order, plus the sent activations it keeps until the step
// ends; FSDP gathers per pipeline micro-batch and without prefetch. A layout's numbers are those
// of its rank with the largest total.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/nn/decoder.h"
#include "titan/parallel/pipeline_schedule.h"

namespace titan::train {

struct PlanInput {
  nn::DecoderConfig model;
  int64_t world = 1;
  int64_t dp_replicate = 1;
  int64_t seq_len = 2048;
  int64_t local_batch = 1;   // per data-parallel rank
  int64_t accumulation = 1;  // micro-batches per step
  bool sequence_parallel = true;
  bool prefetch = true;
  double memory_per_rank = 0;  // bytes; 0 = no limit
  std::vector<nn::Recompute> recompute;  // activation checkpointing per layer; empty = keep_all
  bool bf16 = false;         // training.mixed_precision_param = bfloat16
  bool bf16_reduce = false;  // training.mixed_precision_reduce = bfloat16
  int64_t ep = 0;            // expert-parallel degree; 0 = every valid one (1 for a dense model)
  // Pipeline parallelism (pipeline.pp > 1): the stages, their schedule, rows per micro-batch.
  parallel::PipelineLayout pipeline;
  parallel::PipelineScheduleKind schedule = parallel::PipelineScheduleKind::one_f_one_b;
  int64_t micro_rows = 1;
};

struct LayoutPlan {
  int64_t dp_replicate = 1, dp_shard = 1, tp = 1, ep = 1, pp = 1;
  int64_t pp_rank = 0;   // the rank whose numbers these are (the one needing most memory)
  double bubble = 0;     // the schedule's ideal idle share (0 without a pipeline)
  double parameters = 0, gradients = 0, optimizer = 0, gathered = 0, activations = 0, logits = 0, transient = 0;
  double total = 0;
  double comm_bytes = 0;  // per step per rank
  double all_to_all_bytes = 0;  // of comm_bytes: expert parallelism's exchange
  bool fits = true;
};

// Every layout with pp x dp_replicate x dp_shard x tp = world whose tp divides heads, kv heads, FFN
// width and vocabulary (and the micro-batch's tokens with sequence parallelism), and, for a MoE
// model without a pipeline, every ep dividing dp_shard and num_experts (or in.ep alone); tp, then
// ep ascending.
std::vector<LayoutPlan> plan_layouts(const PlanInput& in);

// The seed's rule: shard first (tp = 1), add tensor parallelism only when a layout does not fit;
// the index of the first layout that fits, -1 when none does.
int recommended_layout(const std::vector<LayoutPlan>& plans);

}  // namespace titan::train
