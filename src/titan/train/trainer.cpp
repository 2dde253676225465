#include "titan/train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include "titan/checkpoint/atomic_file.h"
#include "titan/config/overrides.h"
#include "titan/config/validate.h"
#include "titan/core/allocator.h"
#include "titan/core/log.h"
#include "titan/data/builtin_datasets.h"
#include "titan/data/prefetch_loader.h"
#include "titan/data/tokenizer/special_tokens.h"
#include "titan/models/qwen3/model.h"
#include "titan/models/qwen3/specs.h"
#include "titan/train/clip.h"
#include "titan/train/flops.h"
#include "titan/train/lr_schedule.h"
#include "titan/train/optimizer.h"
#include "titan/train/peak_flops.h"

namespace titan::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

nn::DecoderConfig model_config(const config::JobConfig& c) {
  nn::DecoderConfig m = qwen3::find_spec(c.model.name).config;
  if (c.model.n_layers > 0) m.num_layers = c.model.n_layers;
  if (m.max_seq_len < c.training.seq_len) m.max_seq_len = c.training.seq_len;
  m.validate();
  return m;
}

data::Tokenizer load_tokenizer(const config::JobConfig& c) {
  const std::filesystem::path dir(c.model.hf_assets_path);
  if (c.model.hf_assets_path.empty() || !std::filesystem::exists(dir / "tokenizer.json")) {
    std::string fix = "set model.hf_assets_path to a folder holding tokenizer.json";
    if (c.training.dataset_path.empty()) {
      fix += str(", or train one: titan train-tokenizer --dataset ", c.training.dataset,
                 " --vocab-size 2048 --out ", c.model.hf_assets_path.empty() ? "DIR" : c.model.hf_assets_path);
    }
    TITAN_FAIL("[train] no tokenizer.json in model.hf_assets_path='", c.model.hf_assets_path, "'. HINT: ", fix);
  }
  return data::Tokenizer::from_file(dir.string());
}

std::string dataset_path(const config::JobConfig& c) {
  if (!c.training.dataset_path.empty()) return c.training.dataset_path;
  return data::materialize_builtin_dataset(c.training.dataset,
                                           (std::filesystem::path(c.job.dump_folder) / "dataset").string());
}

// Labels that count toward the loss (the loader marks none as ignored today, but a masked
// dataset would use -100).
int64_t count_targets(const Tensor& labels_BT) {
  const int64_t* p = labels_BT.data<int64_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < labels_BT.numel(); ++i) n += p[i] >= 0 ? 1 : 0;
  return n;
}

}  // namespace

TrainSummary run_training(const config::JobConfig& c, const std::string& config_name) {
  const int64_t dp_degree = 1;  // one rank until the parallelism issue brings the mesh
  config::validate(c, dp_degree);
  const int64_t accumulation = config::accumulation_steps(c, dp_degree);
  const int64_t B = c.training.local_batch_size, T = c.training.seq_len;

  // Everything that can fail on bad input fails here, before any long work.
  const nn::DecoderConfig mc = model_config(c);
  const data::Tokenizer tokenizer = load_tokenizer(c);
  TITAN_CHECK(tokenizer.vocab_size() <= mc.vocab_size, "[train] the tokenizer in ", c.model.hf_assets_path, " has ",
              tokenizer.vocab_size(), " tokens but model '", c.model.name, "' has vocab_size ", mc.vocab_size,
              ". HINT: train a tokenizer with --vocab-size <= ", mc.vocab_size, " or pick a larger model.name");
  const data::DocumentTokens doc_tokens = data::document_tokens_from_folder(c.model.hf_assets_path, tokenizer);

  std::error_code ec;
  std::filesystem::create_directories(c.job.dump_folder, ec);
  TITAN_CHECK(!ec && std::filesystem::is_directory(c.job.dump_folder), "[train] cannot create job.dump_folder ",
              c.job.dump_folder, ": ", ec ? ec.message() : "a file is in the way",
              ". HINT: set --job.dump_folder to a writable folder");
  const std::filesystem::path dump(c.job.dump_folder);
  ckpt::write_text_file_atomic((dump / "config.toml").string(),
                               str("# titan train --config ", config_name, " (resolved)\n", config::to_toml(c)));

  data::LoaderConfig lc;
  lc.dataset.path = dataset_path(c);
  lc.batch_size = B;
  lc.seq_len = T;
  lc.eot_id = doc_tokens.eot_id;
  lc.bos_id = doc_tokens.bos_id;
  data::PrefetchLoader loader(lc, tokenizer);

  nn::Decoder model(mc);
  qwen3::init_weights(model, static_cast<uint64_t>(c.training.seed));
  nn::ParameterList params = model.parameters();
  AdamW optimizer(params, AdamWConfig{c.optimizer.beta1, c.optimizer.beta2, c.optimizer.eps,
                                      c.optimizer.weight_decay});
  const LrSchedule schedule(LrScheduleConfig{c.training.steps, c.lr_scheduler.warmup_steps,
                                             c.lr_scheduler.decay_ratio, c.lr_scheduler.decay_type,
                                             c.lr_scheduler.min_lr_factor});

  const double flops_per_token = train_flops_per_token(mc, T);
  const PeakFlops peak = device_peak_flops(c.metrics.peak_tflops);
  const double memory_total = device_memory_bytes();
  log_info(str("model ", c.model.name, ": ", mc.num_layers, " layers, dim ", mc.dim, ", ", mc.num_heads, "/",
               mc.num_kv_heads, " heads, vocab ", mc.vocab_size, ", ", static_cast<double>(mc.num_params()) / 1e6,
               "M parameters; ", flops_per_token / 1e6, " MFLOP/token"));
  log_info(str("data ", lc.dataset.path, " | tokenizer ", c.model.hf_assets_path, " (", tokenizer.vocab_size(),
               " tokens) | global batch ", B * accumulation * dp_degree, " x ", T, " tokens (local ", B,
               ", accumulation ", accumulation, ")"));
  log_info(str("peak ", peak.flops / 1e12, " TFLOP/s (", peak.source, ") | dump folder ", dump.string()));
  log_info(str("training ", c.training.steps, " steps with config ", config_name));

  MetricsLogger metrics(MetricsOptions{dump.string(), c.metrics.log_freq, c.training.steps, c.metrics.enable_jsonl,
                                       c.metrics.enable_tensorboard, c.metrics.save_tb_folder, config_name});
  TrainSummary summary;
  const auto loop_start = Clock::now();
  std::vector<data::Batch> micro(static_cast<size_t>(accumulation));
  for (int64_t step = 1; step <= c.training.steps; ++step) {
    const auto t0 = Clock::now();
    host_allocator().reset_peak();
    const double waited_before = loader.seconds_waiting();
    // The whole step's micro-batches first: the loss is normalised by their total target count.
    int64_t targets = 0;
    for (data::Batch& b : micro) {
      std::optional<data::Batch> next = loader.next();
      TITAN_CHECK(next.has_value(), "[train] the data loader ended at step ", step);
      b = std::move(*next);
      targets += count_targets(b.labels_BT);
    }
    TITAN_CHECK(targets > 0, "[train] step ", step, " has no target tokens. HINT: check the dataset");

    model.zero_grad();
    double loss_sum = 0.0;
    for (const data::Batch& b : micro) {
      loss_sum += model.forward_backward(b.inputs_BT, b.labels_BT, 1.0f / static_cast<float>(targets)).loss_sum;
    }
    for (data::Batch& b : micro) b = data::Batch{};
    const double loss = loss_sum / static_cast<double>(targets);
    const double grad_norm = clip_grad_norm(params, c.training.max_norm);
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      const std::string where = first_nonfinite_grad(params);
      TITAN_FAIL("[train] step ", step, ": loss ", loss, ", grad_norm ", grad_norm,
                 where.empty() ? std::string() : str(" (first non-finite gradient: ", where, ")"),
                 ". HINT: lower optimizer.lr, raise lr_scheduler.warmup_steps or set training.max_norm");
    }
    const double lr = c.optimizer.lr * schedule.factor(step);
    optimizer.step(lr);

    StepMetrics m;
    m.step = step;
    m.loss = loss;
    m.grad_norm = grad_norm;
    m.lr = lr;
    m.tokens = B * T * accumulation;
    m.seconds = seconds_since(t0);
    m.tps = static_cast<double>(m.tokens) / m.seconds;
    m.tflops = m.tps * flops_per_token / 1e12;
    m.mfu = 100.0 * m.tflops * 1e12 / peak.flops;
    m.memory_bytes = static_cast<double>(host_allocator().stats().peak_bytes);
    m.memory_percent = 100.0 * m.memory_bytes / memory_total;
    m.data_wait_seconds = loader.seconds_waiting() - waited_before;
    metrics.record(m);
  }
  summary.seconds = seconds_since(loop_start);
  metrics.finish();
  summary.steps = metrics.history();
  log_info(str("done: ", c.training.steps, " steps in ", summary.seconds, " s; metrics, config.toml and loss.svg in ",
               dump.string()));
  return summary;
}

}  // namespace titan::train
