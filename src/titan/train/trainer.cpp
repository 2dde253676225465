#include "titan/train/trainer.h"

#include <cmath>

#include "titan/core/allocator.h"
#include "titan/core/clock.h"
#include "titan/core/log.h"
#include "titan/nn/lora.h"
#include "titan/ops/softmax_xent/softmax_xent.h"
#include "titan/train/clip.h"
#include "titan/train/stop_signal.h"

namespace titan::train {

Trainer::Trainer(const config::JobConfig& config, std::string config_name)
    : c_(config), config_name_(std::move(config_name)) {}

Trainer::~Trainer() = default;

void Trainer::log_setup() const {
  const nn::DecoderConfig& mc = resolved_.config;
  const double params_m = static_cast<double>(mc.num_params()) / 1e6;
  log_info(str(model_label(c_), ": ", mc.num_layers, " layers, dim ", mc.dim, ", ", mc.num_heads, "/",
               mc.num_kv_heads, " heads, vocab ", mc.vocab_size, ", ", params_m, "M parameters; ",
               flops_per_token_ / 1e6, " MFLOP/token"));
  log_info(str("data ", loader_config_.dataset.path, " | tokenizer ", c_.model.hf_assets_path, " (",
               tokenizer_->vocab_size(), " tokens) | global batch ", B_ * accumulation_ * dp_, " x ", T_,
               " tokens (local ", B_, ", accumulation ", accumulation_, ", data parallel ", dp_, ")"));
  if (c_.lora.rank > 0) {
    const size_t modules = nn::lora_linears(model_->model()).size();
    log_info(str("[lora] rank ", c_.lora.rank, ", alpha ", c_.lora.alpha, " on ", modules, " projections: ",
                 static_cast<double>(trainable_params_) / 1e6, "M trainable parameters (",
                 100.0 * static_cast<double>(trainable_params_) / static_cast<double>(mc.num_params()), "% of ",
                 params_m, "M); the base is frozen in ", c_.training.mixed_precision_param,
                 c_.lora.base_quantization == "none"
                     ? std::string()
                     : str(", its linear weights quantized ", c_.lora.base_quantization,
                           " (bitsandbytes' format, decoded at each use)")));
  }
  if (const auto* muon = dynamic_cast<const Muon*>(optimizer_.get())) log_info(str("[optimizer] ", muon->describe()));
  if (c_.optimizer.state_dtype == "bfloat16") {
    log_info("[optimizer] AdamW moments stored in bf16 (4 bytes per trained parameter instead of 8), updated in f32 "
             "and rounded to nearest even");
    // v's per-step decay is (1 - beta2) relative; below half a bf16 ulp (2^-9) it rounds away.
    if (c_.optimizer.beta2 > 0.99) {
      log_warn(str("[optimizer] optimizer.beta2=", c_.optimizer.beta2, " with bf16 moments: the second moment's decay of ",
                   1.0 - c_.optimizer.beta2, " per step is below bf16's rounding (0.002), so it stops shrinking when "
                   "gradients do. HINT: beta2 <= 0.99, or optimizer.state_dtype float32"));
    }
  }
  if (model_->sharded()) {
    const double held = static_cast<double>(model_->shard_numel());
    const int64_t tp = model_->tp_degree();
    log_info(str("[parallel] ", world_->size(), " ranks over ", world_->backend(), ": ", mesh_->degrees().describe(),
                 tp > 1 ? (model_->sequence_parallel() ? " (sequence parallel)" : " (no sequence parallel)") : "",
                 " | FSDP: this rank holds ", held / 1e6, "M of ", params_m, "M parameters (",
                 (c_.optimizer.state_dtype == "bfloat16" ? 12.0 : 16.0) * held / double(1 << 30),
                 " GiB with gradients and AdamW moments), blocks gathered just in time"));
  }
  // What stays allocated for the whole run: parameters (or this rank's shards), gradients, AdamW
  // moments, buffers, and the loader's batches.
  // Frozen weights read in place from the model folder's files (models/decoder/weights.cpp) are
  // the page cache's: resident in this process only as far as a step reads them.
  size_t mapped = 0;
  for (const nn::Parameter* p : model_->model().parameters()) {
    if (p->compute.reads_file()) mapped += p->compute.nbytes();
  }
  log_info(str("[memory] after setup: ", static_cast<double>(host_allocator().stats().live_bytes) / double(1 << 30),
               " GiB allocated (parameters, gradients, optimizer state, buffers)",
               mapped == 0 ? std::string() : str("; ", static_cast<double>(mapped) / double(1 << 30),
                                                 " GiB of frozen weights read in place from the model folder's files (page "
                                                 "cache, resident as far as steps read them)")));
  if (parallel::Pipeline* pipeline = model_->pipeline()) {
    const int64_t micro = B_ / c_.parallelism.pipeline_parallel_microbatch_size;
    log_info(str("[pipeline] ", pipeline_.layout.num_stages(), " stages on ", pipeline_.layout.pp, " ranks, ",
                 parallel::pipeline_schedule_name(pipeline->kind()), ", ", micro, " micro-batches of ",
                 c_.parallelism.pipeline_parallel_microbatch_size, " rows per local batch (ideal bubble ",
                 100.0 * parallel::pipeline_bubble_fraction(pipeline_.layout, micro), "%): ",
                 pipeline_.layout.describe()));
  }
  if (c_.activation_checkpoint.mode != "none") {
    int64_t replayed = 0, thinned = 0;
    for (nn::Recompute r : recompute_) {
      replayed += r == nn::Recompute::keep_input;
      thinned += r == nn::Recompute::keep_ops;
    }
    log_info(str("[activation checkpointing] ", c_.activation_checkpoint.mode,
                 c_.activation_checkpoint.mode == "selective" ? " " + c_.activation_checkpoint.selective_ac_option : "",
                 ": of ", recompute_.size(), " blocks, ", replayed, " keep only their input (forward replayed in "
                 "backward), ", thinned, " recompute their norms, RoPE and SwiGLU"));
  }
  log_info(str("[precision] ", precision_line(precision_.param)));
  log_info(str("peak ", peak_.flops / 1e12, " TFLOP/s ", precision_name(peak_.precision), " (", peak_.source,
               ") | dump folder ", c_.job.dump_folder));
  log_info(str("training ", c_.training.steps, " steps with config ", config_name_));
}

TrainSummary Trainer::train() {
  TrainSummary summary;
  if (start_.step >= c_.training.steps && start_.resumed) {
    log_info(str("nothing to do: the checkpoint is at step ", start_.step, " and training.steps is ",
                 c_.training.steps, ". HINT: raise --training.steps to train further"));
    return summary;
  }
  checkpointer_->prepare(start_);
  MetricsOptions mo = metrics_options(c_, config_name_);
  mo.append = start_.resumed;  // a resumed run continues its metrics.jsonl
  mo.files = world_->rank() == 0;
  mo.console = log_console_enabled();
  metrics_ = std::make_unique<MetricsLogger>(mo);
  const auto loop_start = Clock::now();
  micro_.resize(static_cast<size_t>(accumulation_));
  int stop_signal = 0;
  int64_t last_step = start_.step;
  {
    const StopSignals signals;
    for (int64_t step = start_.step + 1; step <= c_.training.steps && stop_signal == 0; ++step) {
      metrics_->record(train_step(step));
      if (validator_ && (step % c_.validation.freq == 0 || step == c_.training.steps)) {
        const ValidationMetrics v = validator_->run(*model_, step, [this] { return agreed_stop_signal(); });
        if (!v.interrupted) metrics_->record_validation(v);
      }
      if (checkpointer_->due(step)) checkpointer_->save(step, tokens_seen_);
      last_step = step;
      stop_signal = agreed_stop_signal();
    }
  }
  if (stop_signal != 0) {
    checkpointer_->finish();  // the in-flight write completes: a checkpoint is never left half-done
    metrics_->finish();
    throw Interrupted(stop_signal, str("stopped by ", signal_name(stop_signal), " after step ", last_step, " of ",
                                       c_.training.steps, "; metrics are flushed and every checkpoint written is "
                                       "complete. HINT: rerun the same command to resume from the newest one"));
  }
  checkpointer_->finish();
  if (c_.checkpoint.last_save_in_hf) checkpointer_->export_hf();
  if (c_.checkpoint.last_save_in_gguf) checkpointer_->export_gguf();
  if (!c_.lora.save_adapter.empty()) checkpointer_->export_adapter();
  summary.seconds = seconds_since(loop_start);
  metrics_->finish();
  summary.steps = metrics_->history();
  summary.validations = metrics_->validations();
  log_info(str("done: ", c_.training.steps, " steps in ", summary.seconds,
               " s; metrics, config.toml and loss.svg in ", c_.job.dump_folder));
  return summary;
}

// The stop signal every rank acts on after this step: the largest any rank received (a signal
// reaches the ranks of a job at different moments, so they agree here, once per step).
int Trainer::agreed_stop_signal() const {
  double signal = StopSignals::pending();
  if (world_->size() > 1) world_->all_reduce_max(std::span<double>(&signal, 1));
  return static_cast<int>(signal);
}

// The whole step's micro-batches first: the loss is normalised by their total target count (of
// the global batch: every rank sees it whole, then keeps its rows).
int64_t Trainer::next_micro_batches(int64_t step) {
  int64_t targets = 0;
  for (data::Batch& b : micro_) {
    std::optional<data::Batch> next = loader_->next();
    TITAN_CHECK(next.has_value(), "[train] the data loader ended at step ", step);
    targets += ops::count_targets(next->labels_BT);  // labels of -100 would not count
    b = data_parallel_rows(*next, dp_rank_, B_);
  }
  TITAN_CHECK(targets > 0, "[train] step ", step, " has no target tokens. HINT: check the dataset");
  return targets;
}

int64_t Trainer::forwards_per_step() const { return accumulation_ * dp_ * model_->forwards_per_batch(B_); }

// The one rule for every loss term a model returns (nn/loss_terms.h): its global sum over its
// denominator is its value, and the loss is the weighted sum of the values. Every rank holds the
// same terms (each global_sum is a collective).
static StepTotals step_loss(models::Parallelized& model, const std::vector<nn::LossTerm>& terms, int64_t targets,
                            int64_t forwards_per_step) {
  StepTotals t;
  for (const nn::LossTerm& term : terms) {
    const double sum = model.global_sum(term.sum);  // a pipeline's last stage holds them
    const int64_t denominator = term.denominator == nn::LossDenominator::targets ? targets : forwards_per_step;
    const double value = sum / static_cast<double>(denominator);
    t.terms.push_back({term.name, value});
    t.loss += term.weight * value;
  }
  return t;
}

StepTotals run_step(models::Parallelized& model, Optimizer& optimizer, const std::vector<data::Batch>& micro,
                    int64_t targets, int64_t forwards_per_step, double max_norm,
                    const std::function<double(const StepTotals&)>& lr_for, std::optional<nn::LoraDropoutKey> dropout) {
  model.zero_grad();
  const float grad_scale = 1.0f / static_cast<float>(targets);
  const float forward_scale = 1.0f / static_cast<float>(forwards_per_step);
  nn::LossResult sums{0.0, 0, model.loss_terms()};
  struct KeyReset {  // unset on every way out, so validation and generation never drop
    ~KeyReset() { nn::set_lora_dropout_key(std::nullopt); }
  } reset;
  for (size_t i = 0; i < micro.size(); ++i) {
    const data::Batch& b = micro[i];
    if (dropout) {
      dropout->micro = static_cast<int64_t>(i);
      nn::set_lora_dropout_key(dropout);
    }
    sums.add(model.forward_backward(b.inputs_BT, b.labels_BT, grad_scale, forward_scale, b.positions_BT));
  }
  nn::set_lora_dropout_key(std::nullopt);
  model.finish_grads();
  StepTotals t = step_loss(model, sums.terms, targets, forwards_per_step);
  const SquaresReducer global = [&](double x) { return model.grad_squares(x); };
  t.grad_norm = clip_grad_norm(model.shards(), max_norm, model.sharded() ? global : nullptr, &model.norm_params());
  optimizer.step(lr_for(t));
  return t;
}

void Trainer::check_finite(int64_t step, double loss, double grad_norm) const {
  if (std::isfinite(loss) && std::isfinite(grad_norm)) return;
  const std::string where = first_nonfinite_grad(model_->shards());
  TITAN_FAIL("[train] step ", step, ": loss ", loss, ", grad_norm ", grad_norm,
             where.empty() ? std::string() : str(" (first non-finite gradient: ", where, ")"),
             ". HINT: lower optimizer.lr, raise lr_scheduler.warmup_steps or set training.max_norm");
}

StepMetrics Trainer::train_step(int64_t step) {
  const auto t0 = Clock::now();
  host_allocator().reset_peak();
  model_->reset_comm_stats();
  const double waited_before = loader_->seconds_waiting();
  const int64_t targets = next_micro_batches(step);
  StepMetrics m;
  m.step = step;
  run_step(*model_, *optimizer_, micro_, targets, forwards_per_step(), c_.training.max_norm, [&](const StepTotals& t) {
    m.loss = t.loss;
    m.loss_terms = t.terms;
    m.grad_norm = t.grad_norm;
    check_finite(step, m.loss, m.grad_norm);
    m.lr = c_.optimizer.lr * schedule_->factor(step);
    return m.lr;
  }, nn::LoraDropoutKey{static_cast<uint64_t>(c_.training.seed), step, 0, dp_rank_});
  for (data::Batch& b : micro_) b = data::Batch{};
  m.model_metrics = model_->step_metrics(m.loss_terms);  // before the hooks reset what they read
  model_->post_step();
  m.tokens = B_ * T_ * accumulation_;
  m.seconds = seconds_since(t0);
  // Per rank: this share's tokens over the ranks that process the same rows (pp, cp, tp).
  m.tps = static_cast<double>(m.tokens) / m.seconds / static_cast<double>(mesh_->ranks_per_row());
  m.tflops = m.tps * flops_per_token_ / 1e12;
  m.mfu = checked_mfu(m.tflops * 1e12, peak_);  // <= 100: a beaten peak is re-measured or raised
  m.memory_bytes = static_cast<double>(host_allocator().stats().peak_bytes);
  m.memory_percent = 100.0 * m.memory_bytes / memory_total_;
  m.data_wait_seconds = loader_->seconds_waiting() - waited_before;
  const parallel::CommStats cs = model_->comm_stats();
  m.comm_seconds = cs.seconds;
  m.comm_bytes =
      static_cast<double>(cs.all_gather_bytes + cs.reduce_scatter_bytes + cs.all_reduce_bytes + cs.all_to_all_bytes +
                          cs.send_bytes);
  tokens_seen_ += m.tokens * dp_;
  return m;
}

TrainSummary run_training(const config::JobConfig& config, const std::string& config_name) {
  Trainer trainer(config, config_name);
  trainer.setup();
  return trainer.train();
}

}  // namespace titan::train
