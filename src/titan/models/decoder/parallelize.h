// parallelize (torchtitan's parallelize_fn) for the decoder families: one rank's share of a model on
// a DeviceMesh, through its family's parallel plan. It is the one place that knows both the decoder's
// structure (its FSDP units, which FQNs each pipeline stage holds, which parameters TP splits) and
// the mechanics in parallel/ (Comm, Fsdp, TensorParallel, ExpertParallel, Pipeline), which name no
// model and no FQN. It owns what the trainer must not know about: tensor parallelism
// (this rank's heads, FFN columns and vocabulary rows, cut from the whole model, and the TP regions'
// collectives), expert parallelism (this rank's experts, cut from the whole model, whole on this
// rank and outside FSDP; the MoE blocks exchange tokens through ExpertParallel), FSDP (flat
// per-unit shards of everything else, gathered just in time), and the reductions that make a
// step's gradients and statistics global (HSDP replicas, TP partial gradients, expert gradients
// over the ranks holding the same experts, MoE expert loads).
//
// A world of one is the same object with nothing sharded: shards() are the model's parameters and
// every reduction is skipped, so the single-rank path costs nothing extra.
//
//   setup    Parallelized p(std::move(whole), spec, mesh, options)   (every rank: the same whole model)
//   pipeline with mesh pp > 1 each rank keeps its stages' modules only (parallel/pipeline.h)
//   step     p.zero_grad(); p.forward_backward(micro-batch) for each; p.finish_grads();
//            p.global_sum(each loss term's sum);
//            the optimizer updates p.shards(); clipping sums p.grad_squares() over p.norm_params();
//            p.step_metrics(the terms' values); p.post_step() (the hooks the model registered: an
//            MoE's expert-bias update or load reset)
//   export   p.with_full_model(fn): the whole model assembled (one path for every layout), fn on
//            world rank 0, freed again
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "titan/checkpoint/train_state.h"
#include "titan/models/model_spec.h"
#include "titan/parallel/comm.h"
#include "titan/parallel/expert_parallel.h"
#include "titan/parallel/fsdp.h"
#include "titan/parallel/mesh.h"
#include "titan/parallel/pipeline.h"
#include "titan/parallel/tensor_parallel.h"

namespace titan::models {

using parallel::Comm;
using parallel::CommStats;
using parallel::DeviceMesh;
using parallel::ExpertParallel;
using parallel::Fsdp;
using parallel::Pipeline;
using parallel::PipelineLayout;
using parallel::PipelineScheduleKind;
using parallel::ShardPiece;
using parallel::TensorParallel;

struct ParallelizeOptions {
  bool sequence_parallel = true;  // with tp > 1 (parallelism.enable_sequence_parallel)
  bool fsdp_prefetch = true;      // parallelism.fsdp_prefetch
  DType param_dtype = DType::f32;   // training.mixed_precision_param: what modules compute with
  DType reduce_dtype = DType::f32;  // training.mixed_precision_reduce: FSDP's gradient reduce-scatter
  // With mesh pp > 1: the stages (each rank keeps its own) and their schedule; FSDP then gathers
  // each unit when it is used, without prefetch (a prefetched block could wait for a later stage).
  PipelineLayout pipeline;
  PipelineScheduleKind schedule = PipelineScheduleKind::one_f_one_b;
  int64_t pipeline_micro_rows = 1;  // rows per pipeline micro-batch
  // With tp > 1: builds this rank's share from its local config as the whole model was built (the
  // job's config tree with its LoRA adapters, a frozen base, activation checkpointing). Unset:
  // spec.build(local, spec.config_tree(local)).
  std::function<std::unique_ptr<nn::Decoder>(const nn::DecoderConfig& local)> build_local;
};

// The decoder's FSDP units in nn::UnitHooks order: the root (embedding, final norm, head), then
// one per transformer block; trainable parameters only (a frozen LoRA base is not sharded: every
// rank holds it whole, in its storage dtype, and it has no gradient to reduce).
std::vector<nn::ParameterList> decoder_units(nn::Decoder& model);

// The decoder's pipeline stages (parallel::pipeline_layout) with split points given as layer FQNs,
// torchtitan's parallelism.pipeline_parallel_split_points: "layers.2,layers.4" (comma-separated,
// ascending) starts stage s at its point. A malformed or out-of-range point is a config mistake.
PipelineLayout decoder_pipeline_layout(int64_t num_layers, int64_t pp, PipelineScheduleKind kind,
                                       int64_t layers_per_stage, const std::string& split_points);
// The stage holding a decoder parameter or buffer, by FQN: tok_embeddings.* stage 0, layers.<i>.*
// the stage of layer i, the rest (norm, output) the last.
int64_t decoder_stage_of(const PipelineLayout& layout, const std::string& fqn);

// Tensor parallelism's placement of the decoder's parameters, through the family's plan: this
// rank's share of `full`'s parameters copied into `local` (built from plan.tp_local_config), and
// the reverse, every rank's shares gathered into `full` (a collective over `tp`).
void copy_tp_shard(const ParallelPlan& plan, nn::Decoder& full, nn::Decoder& local, int64_t tp_rank,
                   int64_t tp_degree);
void gather_tp_shards(const ParallelPlan& plan, nn::Decoder& local, nn::Decoder& full, Comm& tp);

class Parallelized {
 public:
  // `whole` is the full model, initialised or loaded identically on every rank; under TP it is
  // replaced by this rank's share. `mesh` must outlive this object.
  Parallelized(std::unique_ptr<nn::Decoder> whole, const ModelSpec& spec, DeviceMesh& mesh,
               ParallelizeOptions options);
  // What parallelize would refuse for `whole` on `mesh`, checked before any long work (throws).
  static void check(nn::Decoder& whole, DeviceMesh& mesh);
  ~Parallelized();  // FSDP detaches from the model before the model goes
  Parallelized(const Parallelized&) = delete;
  Parallelized& operator=(const Parallelized&) = delete;

  nn::Decoder& model() { return *model_; }
  const ModelSpec& spec() const { return spec_; }
  DeviceMesh& mesh() { return mesh_; }
  bool sharded() const { return fsdp_ != nullptr; }  // more than one rank
  int64_t tp_degree() const { return mesh_.degrees().tp; }
  int64_t pp_degree() const { return mesh_.degrees().pp; }
  Pipeline* pipeline() { return pipeline_.get(); }  // null without pipeline parallelism
  int64_t tp_rank() { return mesh_.tp().rank(); }
  bool sequence_parallel() const { return tp_.sequence_parallel(); }

  // What the optimizer updates and checkpoints hold: this rank's FSDP pieces (or, on one rank, the
  // whole parameters), each named by its parameter's FQN, with its place in that parameter (the
  // TP-local one under tensor parallelism).
  const nn::ParameterList& shards() const { return shards_; }
  const std::vector<ShardPiece>& pieces() const { return pieces_; }
  // Every parameter of this rank's model (all FSDP pieces together): FQN and TP-local shape.
  const std::vector<std::pair<std::string, Shape>>& full_parameters() const { return full_; }
  // The one placement of each piece, as checkpoints save and restore it: where shards()[i] sits in
  // its global parameter (global shape, the TP slice, the flat start within that slice).
  const std::vector<ckpt::TensorPiece>& placements() const { return placements_; }
  // full_parameters() with their global shapes (every TP slice together).
  const std::vector<std::pair<std::string, Shape>>& global_parameters() const { return global_; }
  // The shards the gradient norm counts: a TP-replicated parameter once (on tp rank 0), an expert
  // weight once (in the first ep group of dp_shard).
  const nn::ParameterList& norm_params() const { return norm_params_; }
  // shards()[i] is a copy that another rank of this dp replica holds as well (tp-replicated, or
  // an expert weight outside the first ep group): a checkpoint takes it from that rank.
  bool is_copy(size_t i) const { return is_copy_[i] != 0; }
  int64_t ep_degree() const { return mesh_.degrees().ep; }
  // Rows each ep rank's experts processed in this step's forwards (from the MoE loads summed over
  // data-parallel ranks: call after finish_grads); empty without expert parallelism.
  std::vector<int64_t> ep_rank_loads();
  // Split dimension of a parameter under this mesh's TP (-1: replicated, or tp = 1).
  int tp_split_dim(const std::string& fqn) const;
  int64_t shard_numel() const;  // elements this rank holds (values; gradients as many)

  void zero_grad();
  // The model's loss terms (nn::Decoder::loss_terms), zero sums: every LossResult's terms, in order.
  std::vector<nn::LossTerm> loss_terms() const { return model_->loss_terms(); }
  // One execution path for every layout: a micro-batch (i64 [B, T] ids and labels) through this
  // rank's part of the model, forward and backward, gradients accumulated (grad_scale and
  // forward_scale as nn::Decoder::forward_backward's) — the whole model as one stage, or this
  // rank's pipeline stages over micro-batches of the pipeline's rows. The returned term sums are
  // this rank's (a pipeline's on its last stage only): global_sum makes a step's total global.
  // positions_BT: the batch's positions, i64 [B, T] (undefined: 0..T-1 per row).
  nn::LossResult forward_backward(const Tensor& ids_BT, const Tensor& labels_BT, float grad_scale,
                                  float forward_scale, const Tensor& positions_BT = Tensor());
  // Forward only (validation): the loss terms of the batch, as forward_backward's. No training
  // state changes: the expert load its routing counts is put back as it was.
  nn::LossResult forward_loss(const Tensor& ids_BT, const Tensor& labels_BT, const Tensor& positions_BT = Tensor());
  // The forwards one forward_backward of `rows` rows runs (a pipeline runs one per micro-batch):
  // what a per-forward loss term (the aux loss, one per forward as HF computes it) is averaged over.
  int64_t forwards_per_batch(int64_t rows) const;
  // What the step's metrics show of the model beyond its loss (nn::StepMetric), from the step's
  // state and its loss terms' values. For an MoE: expert_load_min / expert_load_max (tokens routed
  // to the least and the most loaded expert over every MoE layer and micro-batch; uniform: tokens
  // x top_k / experts) and aux_loss (the aux term's value, 0 without aux-loss balancing); under
  // expert parallelism ep_rank_load ((token, expert) pairs each ep rank's experts processed, summed
  // over the MoE layers and the ep groups). A dense model: none. A collective over pp with a
  // pipeline; after finish_grads, before post_step (which resets the load).
  std::vector<nn::StepMetric> step_metrics(const std::vector<nn::LossValue>& losses);
  // Runs the post-step hooks in the order they were added; once per step, after the optimizer's
  // update. The decoder registers its MoE balancing at construction: bias balancing updates each
  // router's expert bias from the step's load, otherwise the load is reset.
  void post_step();
  void add_post_step_hook(std::function<void()> hook) { post_step_hooks_.push_back(std::move(hook)); }
  // A sum this rank holds part of (pipeline_sum, then dp_sum): the step's total on every rank.
  double global_sum(double x) { return dp_sum(pipeline_sum(x)); }
  // After the step's last micro-batch: HSDP's replica sum, TP partial gradients summed over tp,
  // expert gradients summed over expert_dp, MoE expert loads summed over data-parallel ranks.
  // No-op on one rank.
  void finish_grads();
  // A scalar summed over the data-parallel ranks (each saw its share of the batch).
  double dp_sum(double x);
  // The model's expert load (nn::Decoder::expert_load) over every pipeline stage's layers.
  nn::ExpertLoad expert_load();
  // A scalar one pipeline stage holds (the loss, on the last), on every rank; x without a pipeline.
  double pipeline_sum(double x);
  // A partial sum of gradient squares made global: every shard once, every TP share once, every
  // pipeline stage once.
  double grad_squares(double local);

  CommStats comm_stats() const;  // FSDP and TP together, since reset_comm_stats
  void reset_comm_stats();

  // The whole model on every rank for `fn` (called on world rank 0 only), then freed again; a
  // collective. With a pipeline, world rank 0 receives the other stages' parameters and buffers.
  void with_full_model(const std::function<void(const nn::Decoder&)>& fn);

 private:
  void collect_stages(std::unique_ptr<nn::Decoder>& gathered, const std::function<void(const nn::Decoder&)>& fn);

  const ModelSpec& spec_;
  DeviceMesh& mesh_;
  nn::DecoderConfig full_config_;  // the whole model's (this rank's is model().config())
  int64_t pipeline_micro_rows_ = 1;
  std::unique_ptr<nn::Decoder> model_;
  TensorParallel tp_;
  std::unique_ptr<Fsdp> fsdp_;  // null on one rank
  std::unique_ptr<Pipeline> pipeline_;  // null without pipeline parallelism
  nn::ParameterList shards_;
  std::vector<ShardPiece> pieces_;
  std::vector<std::pair<std::string, Shape>> full_;
  std::vector<ckpt::TensorPiece> placements_;
  std::vector<std::pair<std::string, Shape>> global_;
  nn::ParameterList norm_params_;
  std::vector<char> is_copy_;
  nn::ParameterList tp_partial_;  // shards whose gradient is a partial sum over tp
  std::unique_ptr<ExpertParallel> ep_;  // null unless expert_parallel_degree > 1
  nn::ParameterList experts_;           // this rank's expert weights (whole, not FSDP-sharded)
  std::vector<std::function<void()>> post_step_hooks_;

  void register_moe_balancing();  // the MoE's post-step hook (no-op for a dense model)

  void split_experts();
  ckpt::TensorPiece place(const std::string& fqn, const Shape& local, int64_t start) const;
  void gather_experts(std::vector<Tensor>& local);  // whole expert weights into the model (export)
};

}  // namespace titan::models
