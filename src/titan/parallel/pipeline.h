// Pipeline: runs one rank's stages of a pipeline step (parallel/pipeline_schedule.h gives the
// layout and the order). The rank's decoder keeps only its stages' modules
// (nn::Decoder::keep_pipeline_part); activations [N, D] go forward to the next stage's rank and their
// gradients back over the pp communicator: a send starts and the step goes on (it is waited for at
// the end of the step), a receive waits. Each (stage, micro-batch) message has its own tag, so
// messages match whatever order two ranks send them in.
//
//   step   Pipeline::run(ids_BT, labels_BT, micro_rows, grad_scale) once per accumulation
//          micro-batch: its rows split into micro-batches of micro_rows, the schedule's forwards and
//          backwards, gradients accumulated (+=) into the stage's parameters in micro-batch order
//          (FSDP's hooks gather and reduce-scatter each block as in a plain forward / backward).
//
// The loss exists on the last stage only; run() returns 0 elsewhere (Parallelized::pipeline_sum
// makes it every rank's).
#pragma once

#include <memory>
#include <vector>

#include "titan/nn/decoder.h"
#include "titan/parallel/comm.h"
#include "titan/parallel/fsdp.h"
#include "titan/parallel/pipeline_schedule.h"

namespace titan::parallel {

class Pipeline {
 public:
  // `model` already holds this rank's part of `layout` (keep_pipeline_part(layout.layers_of(rank),
  // ...)); `pp` is the pipeline communicator (rank = pp rank). Both must outlive this object.
  // token_shards: how many ranks split a micro-batch's tokens between stages (tp under sequence
  // parallelism, else 1): a stage's output is [N / token_shards, D].
  Pipeline(nn::Decoder& model, Comm& pp, PipelineLayout layout, PipelineScheduleKind kind, int64_t token_shards = 1);

  const PipelineLayout& layout() const { return layout_; }
  PipelineScheduleKind kind() const { return kind_; }
  bool holds_last_stage() const;
  // One pipeline step over the rows of ids_BT / labels_BT (i64 [B, T], B a multiple of micro_rows);
  // returns the model's loss terms summed over the micro-batches (nn/loss_terms.h; the aux loss,
  // one per micro-batch, scaled into the gradients by forward_scale) on the last stage, the same
  // terms with 0 sums on other ranks. The router totals and the aux gradient travel beside the
  // activations (nn::Decoder::stage_totals).
  // positions_BT: the rows' positions, i64 [B, T] (undefined: 0..T-1 per row), split like ids.
  nn::LossResult run(const Tensor& ids_BT, const Tensor& labels_BT, int64_t micro_rows, float grad_scale,
                     float forward_scale = 1.0f, const Tensor& positions_BT = Tensor());
  // Forward only (validation): the whole batch through this rank's stages in order, nothing saved;
  // the loss terms on the last stage (0 sums on other ranks).
  nn::LossResult forward_loss(const Tensor& ids_BT, const Tensor& labels_BT, const Tensor& positions_BT = Tensor());
  // Bytes sent and seconds waiting for receives and sends (send_bytes, seconds), since reset_stats.
  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  struct Slot;  // one (stage, micro-batch) in flight: its saved activations
  int64_t local_index(int64_t stage) const;  // this rank's k-th stage
  // What a message carries; with the (receiving stage, micro-batch) it makes the tag.
  enum class Message { activation, gradient, router_totals, aux_gradient };
  int tag(Message kind, int64_t stage, int64_t micro, int64_t micro_batches) const;

  nn::Decoder& model_;
  Comm& pp_;
  PipelineLayout layout_;
  PipelineScheduleKind kind_;
  int64_t rank_ = 0;
  int64_t token_shards_ = 1;
  std::vector<nn::StageSpan> spans_;  // of this rank's stages, in layout_.stages_of(rank_) order
  CommStats stats_;
};

}  // namespace titan::parallel
