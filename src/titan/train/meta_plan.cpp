#include "titan/train/meta_plan.h"

#include "titan/config/validate.h"
#include "titan/core/allocator.h"
#include "titan/models/decoder/parallelize.h"
#include "titan/train/job.h"
#include "titan/train/trainer.h"

namespace titan::train {

int pipeline_rank(const parallel::MeshDegrees& d, int64_t pp_rank) {
  return static_cast<int>(pp_rank * d.dp_replicate * d.dp_shard * d.tp);
}

// Trainer::setup's model, parallelize and optimizer, then Trainer::train_step's computation, on meta.
MetaPlan meta_plan(const config::JobConfig& c, const models::ResolvedModel& model, const nn::ConfigTree& tree,
                   const parallel::MeshDegrees& degrees, int rank) {
  const DeviceScope on_meta(Device::meta);
  Allocator& memory = meta_allocator();
  const int64_t base = memory.stats().live_bytes;
  const auto live = [&] { return static_cast<double>(memory.stats().live_bytes - base); };
  const std::unique_ptr<parallel::Comm> world =
      parallel::make_meta_comm(rank, static_cast<int>(degrees.pp * degrees.dp() * degrees.tp));
  parallel::DeviceMesh mesh(*world, degrees);
  const PrecisionConfig precision = resolve_precision(c);
  const int64_t B = c.training.local_batch_size, T = c.training.seq_len;
  const PipelineConfig pipeline = resolve_pipeline(c.parallelism, model.config.num_layers, B);
  const config::ActivationCheckpointSection& ac = c.activation_checkpoint;
  const std::vector<nn::Recompute> recompute =
      nn::recompute_per_layer(ac.mode, ac.selective_ac_option, model.config.num_layers);
  MetaPlan plan;
  std::unique_ptr<nn::Decoder> whole = build_job_model(c, model, tree, recompute, precision.param);
  models::Parallelized::check(*whole, mesh);
  models::Parallelized parallelized(std::move(whole), *model.spec, mesh, parallelize_options(c, precision, pipeline, model, recompute));
  plan.parameters = live();
  std::unique_ptr<Optimizer> optimizer = make_optimizer(c, parallelized);
  plan.optimizer = live() - plan.parameters;
  // The step's micro-batches as the loader hands them over (ids, labels, positions).
  const int64_t dp = degrees.dp(), accumulation = config::accumulation_steps(c, dp);
  std::vector<data::Batch> micro(static_cast<size_t>(accumulation));
  for (data::Batch& b : micro) {
    b = {Tensor::empty({B, T}, DType::i64), Tensor::empty({B, T}, DType::i64), Tensor::empty({B, T}, DType::i64)};
  }
  memory.reset_peak();
  parallelized.reset_comm_stats();
  const int64_t forwards = accumulation * dp * parallelized.forwards_per_batch(B);
  run_step(parallelized, *optimizer, micro, B * T * accumulation * dp, forwards, c.training.max_norm,
           [&](const StepTotals&) { return c.optimizer.lr; });
  parallelized.post_step();
  plan.peak = static_cast<double>(memory.stats().peak_bytes - base);
  plan.comm = parallelized.comm_stats();
  return plan;
}

}  // namespace titan::train
