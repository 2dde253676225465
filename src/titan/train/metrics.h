// Per-step metrics and where they go: one console line (torchtitan's layout), a JSONL file and
// TensorBoard event files at the logged steps, and a loss-curve SVG over every step at the end.
// Validation passes go to the same places (metrics.jsonl rows with "kind": "validation"; rows
// without "kind" are training steps).
//
//   tps     tokens per second per rank (this rank's tokens of the step / step wall time)
//   tflops  tps x training FLOPs per token (flops.h) / 1e12
//   mfu     tflops / the device peak (peak_flops.h), in %
//   memory  peak bytes of live tensors during the step, and that as % of the device's memory
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "titan/nn/loss_terms.h"

namespace titan::train {

struct StepMetrics {
  int64_t step = 0;
  double loss = 0.0;
  double grad_norm = 0.0;  // before clipping
  double lr = 0.0;
  int64_t tokens = 0;      // this rank's tokens in the step
  double seconds = 0.0;
  double tps = 0.0;
  double tflops = 0.0;
  double mfu = 0.0;        // percent
  double memory_bytes = 0.0;
  double memory_percent = 0.0;
  double data_wait_seconds = 0.0;  // time the step waited for the loader
  // Each loss term's value for the step (nn/loss_terms.h), in the model's order; loss is their
  // weighted sum. The writers show only those the model reports in model_metrics.
  std::vector<nn::LossValue> loss_terms;
  // What the model reports of the step (models::Parallelized::step_metrics lists the decoder's),
  // written as given: metrics.jsonl fields after the ones above, TensorBoard scalars, console text.
  std::vector<nn::StepMetric> model_metrics;
  // Multi-rank (FSDP): bytes this rank passed to collectives in the step (all-gathers and
  // reduce-scatters counted at full unit size, HSDP all-reduces at shard size), and the wall time
  // spent in them. comm_bytes = 0: a single-rank run (no comm field in the line).
  double comm_bytes = 0.0;
  double comm_seconds = 0.0;
};

// One validation pass (train/validator.h), written as a "validate" line, a metrics.jsonl row of
// "kind": "validation", the TensorBoard scalars validation/loss and validation/perplexity, and a
// second series on loss.svg.
struct ValidationMetrics {
  int64_t step = 0;         // the training step the model has finished
  double loss = 0.0;        // mean cross-entropy (nats per target token): the model's first loss term alone
  double perplexity = 0.0;  // exp(loss)
  int64_t targets = 0;      // target tokens of the pass, all data-parallel ranks
  int64_t batches = 0;      // global batches of the pass
  double seconds = 0.0;     // wall time of the pass (loading included)
  bool interrupted = false;  // a stop signal ended the pass early: no loss, nothing to record
};

struct MetricsOptions {
  std::string dump_folder;
  int64_t log_freq = 10;
  int64_t total_steps = 0;
  bool enable_jsonl = true;
  bool enable_tensorboard = false;
  std::string tb_folder;  // relative to dump_folder
  std::string run_name;   // plot title
  bool append = false;    // continue metrics.jsonl (a resumed run) instead of starting it afresh
  bool console = true;    // print the metrics line (false: a rank outside the console's rank filter)
  bool files = true;      // write metrics.jsonl / TensorBoard / loss.svg (rank 0 of a multi-rank job only)
};

class TensorBoardWriter;
class JsonlWriter;

class MetricsLogger {
 public:
  explicit MetricsLogger(MetricsOptions options);
  ~MetricsLogger();

  // Prints and writes when the step is 1, a multiple of log_freq, or the last; remembers every step.
  void record(const StepMetrics& m);
  // Prints and writes every validation pass; remembers it for the plot.
  void record_validation(const ValidationMetrics& v);
  // Writes loss.svg (every step, and the validation passes as a second series) into the dump
  // folder and flushes the writers.
  void finish();

  const std::vector<StepMetrics>& history() const { return history_; }
  const std::vector<ValidationMetrics>& validations() const { return validations_; }
  static std::string format_line(const StepMetrics& m);
  static std::string format_validation_line(const ValidationMetrics& v);

 private:
  MetricsOptions options_;
  std::unique_ptr<JsonlWriter> jsonl_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::vector<StepMetrics> history_;
  std::vector<ValidationMetrics> validations_;
};

}  // namespace titan::train
