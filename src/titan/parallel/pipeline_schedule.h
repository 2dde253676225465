// Pipeline parallelism, the arithmetic (no communication, no model): how the decoder's layers split
// into stages, which rank holds which stage, and the order in which each rank runs its stages'
// forwards and backwards over the micro-batches of one pipeline step (torchtitan's
// pipeline_parallel_* fields and PyTorch's schedules). parallel/pipeline.h runs these orders.
//
// Stages: S stages over pp ranks, V = S / pp stages per rank; stage s lives on rank s % pp (rank r
// holds stages r, r + pp, r + 2 pp, ...: the interleaved layout, which is the plain one when V = 1).
// Stage 0 also holds the embedding, stage S - 1 the final norm and the fused head + loss.
//
// Schedules, over M micro-batches:
//   GPipe            (V = 1) every forward, then every backward: M micro-batches of activations held
//   1F1B             (V = 1) pp - 1 - r forwards of warm-up, then one forward / one backward,
//                    then the remaining backwards: at most pp - r micro-batches held on rank r
//   Interleaved1F1B  (V >= 2) Megatron's interleaved 1F1B (M a multiple of pp): forwards walk the
//                    rank's stages in groups of pp micro-batches, backwards walk them in reverse;
//                    the bubble shrinks by V
// Every rank runs its list in order; a forward waits for its input from the previous stage and a
// backward for its gradient from the next one (sends never wait), and these orders never deadlock
// (tests/unit/parallel/pipeline_schedule_test.cpp simulates them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan::parallel {

enum class PipelineScheduleKind { gpipe, one_f_one_b, interleaved_1f1b };

// "GPipe", "1F1B", "Interleaved1F1B" (case-insensitive, as PyTorch's get_schedule_class); throws a
// one-line Error naming parallelism.pipeline_parallel_schedule otherwise.
PipelineScheduleKind parse_pipeline_schedule(const std::string& name);
const char* pipeline_schedule_name(PipelineScheduleKind kind);
bool is_multi_stage(PipelineScheduleKind kind);  // more than one stage per rank

struct PipelineLayout {
  int64_t pp = 1;                   // ranks along the pipeline
  std::vector<int64_t> first_layer;  // stage s holds layers [first_layer[s], first_layer[s + 1]); size S + 1
  int64_t num_stages() const { return static_cast<int64_t>(first_layer.size()) - 1; }
  int64_t stages_per_rank() const { return num_stages() / pp; }
  int64_t owner(int64_t stage) const { return stage % pp; }
  std::vector<int64_t> stages_of(int64_t pp_rank) const;  // ascending
  std::vector<int64_t> layers_of(int64_t pp_rank) const;  // global layer indices, ascending
  int64_t stage_of_layer(int64_t layer) const;
  std::string describe() const;  // "stage 0: layers 0-1 (+ embedding) on rank 0, ..."
};

// The stages of `num_layers` layers on `pp` ranks (torchtitan's rules):
//   split_layers {2, 4} (ascending, in (0, num_layers): the family parses its split-point names,
//   models/decoder/parallelize.h): stage s starts at its point;
//   else layers_per_stage > 0: stages of that many layers (the last one may be shorter);
//   else pp x (2 for a multi-stage schedule, else 1) stages of near-equal size (the first ones larger).
// Throws a one-line Error naming the field and the fix when a stage would be empty, the stage count is
// not a multiple of pp (or not pp for a single-stage schedule, or not >= 2 pp for Interleaved1F1B).
PipelineLayout pipeline_layout(int64_t num_layers, int64_t pp, PipelineScheduleKind kind, int64_t layers_per_stage,
                               const std::vector<int64_t>& split_layers);

struct PipelineAction {
  enum Kind { forward, backward };
  Kind kind = forward;
  int64_t stage = 0;
  int64_t micro = 0;
  bool operator==(const PipelineAction&) const = default;
};

// What rank `pp_rank` runs in one pipeline step of `micro_batches` micro-batches. Throws a one-line
// Error when the schedule cannot take them (fewer micro-batches than pp ranks; Interleaved1F1B: not
// a multiple of pp).
std::vector<PipelineAction> pipeline_schedule(PipelineScheduleKind kind, const PipelineLayout& layout,
                                              int64_t pp_rank, int64_t micro_batches);

// The idle share of an ideal pipeline step (equal stage times, backward = 2 x forward, no
// communication): (pp - 1) / (V M + pp - 1).
double pipeline_bubble_fraction(const PipelineLayout& layout, int64_t micro_batches);

}  // namespace titan::parallel
