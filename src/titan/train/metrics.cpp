#include "titan/train/metrics.h"

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <variant>

#include "titan/core/error.h"
#include "titan/train/jsonl_writer.h"
#include "titan/core/log.h"
#include "titan/train/loss_plot.h"
#include "titan/train/tensorboard.h"

namespace titan::train {
namespace {

// 12345678 -> "12,345,678"
std::string with_commas(double value) {
  const std::string digits = std::to_string(std::llabs(std::llround(value)));
  std::string out = value < -0.5 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out.push_back(',');
    out.push_back(digits[i]);
  }
  return out;
}

}  // namespace

MetricsLogger::MetricsLogger(MetricsOptions options) : options_(std::move(options)) {
  const std::filesystem::path dump(options_.dump_folder);
  if (!options_.files) options_.enable_jsonl = options_.enable_tensorboard = false;
  if (options_.enable_jsonl) jsonl_ = std::make_unique<JsonlWriter>((dump / "metrics.jsonl").string(), options_.append);
  if (options_.enable_tensorboard) {
    // The writer refuses a link in the folder's own place; one on the way there is refused here.
    const std::filesystem::path tb(options_.tb_folder);
    std::filesystem::path at = dump;
    std::error_code ec;
    for (const std::filesystem::path& part : tb.is_relative() ? tb : std::filesystem::path()) {
      at /= part;
      TITAN_CHECK(!std::filesystem::is_symlink(at, ec), "[tensorboard] ", at.string(), " is a symbolic link; titan "
                  "writes only inside job.dump_folder and does not follow links out of it. HINT: remove the link");
    }
    tensorboard_ = std::make_unique<TensorBoardWriter>((dump / options_.tb_folder).string());
  }
}

MetricsLogger::~MetricsLogger() = default;

std::string MetricsLogger::format_line(const StepMetrics& m) {
  char line[640];
  const int used = std::snprintf(line, sizeof line,
                "step: %5lld  loss: %8.4f  grad_norm: %7.4f  memory: %6.2fGiB(%.2f%%)  tps: %s  tflops: %.2f  "
                "mfu: %.2f%%  lr: %.3e%s",
                static_cast<long long>(m.step), m.loss, m.grad_norm, m.memory_bytes / double(1 << 30),
                m.memory_percent, with_commas(m.tps).c_str(), m.tflops, m.mfu, m.lr,
                m.step == 1 ? "  (step 1 includes warm-up)" : "");
  std::string out = used > 0 ? line : "";
  for (const nn::StepMetric& s : m.model_metrics) out += s.console;
  if (m.comm_bytes > 0) {
    std::snprintf(line, sizeof line, "  comm: %.1fMB %.2fs", m.comm_bytes / 1e6, m.comm_seconds);
    out += line;
  }
  return out;
}

void MetricsLogger::record(const StepMetrics& m) {
  history_.push_back(m);
  const bool log = m.step == 1 || m.step % options_.log_freq == 0 || m.step == options_.total_steps;
  if (!log) return;
  const std::string text = log_rank_tag().empty() ? format_line(m) : log_rank_tag() + " " + format_line(m);
  if (options_.console) {
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  }
  log_tee_line(text);
  if (jsonl_) {
    nlohmann::ordered_json row = {{"step", m.step}, {"loss", m.loss}, {"grad_norm", m.grad_norm}, {"lr", m.lr},
                                  {"tokens", m.tokens}, {"seconds", m.seconds}, {"tps", m.tps}, {"tflops", m.tflops},
                                  {"mfu", m.mfu}, {"memory_gib", m.memory_bytes / double(1 << 30)},
                                  {"memory_percent", m.memory_percent}, {"data_wait_seconds", m.data_wait_seconds}};
    if (m.comm_bytes > 0) {
      row["comm_bytes"] = m.comm_bytes;
      row["comm_seconds"] = m.comm_seconds;
    }
    for (const nn::StepMetric& s : m.model_metrics) {
      std::visit([&](const auto& value) { row[s.name] = value; }, s.value);
    }
    jsonl_->write(row);
  }
  if (tensorboard_) {
    std::vector<std::pair<std::string, double>> scalars = {{"loss_metrics/global_avg_loss", m.loss},
                                                           {"grad_norm", m.grad_norm},
                                                           {"lr", m.lr},
                                                           {"throughput(tps)", m.tps},
                                                           {"tflops", m.tflops},
                                                           {"mfu(%)", m.mfu},
                                                           {"memory/peak_active(GiB)", m.memory_bytes / double(1 << 30)},
                                                           {"memory/peak_active(%)", m.memory_percent}};
    for (const nn::StepMetric& s : m.model_metrics) {
      if (s.tensorboard.empty()) continue;
      if (const auto* n = std::get_if<int64_t>(&s.value)) scalars.emplace_back(s.tensorboard, static_cast<double>(*n));
      if (const auto* x = std::get_if<double>(&s.value)) scalars.emplace_back(s.tensorboard, *x);
    }
    tensorboard_->add_scalars(scalars, m.step);
    tensorboard_->flush();
  }
}

std::string MetricsLogger::format_validation_line(const ValidationMetrics& v) {
  char line[320];
  const int used = std::snprintf(line, sizeof line,
                                 "validate: step %5lld  loss: %8.4f  perplexity: %.4g  tokens: %s (%lld batches)  "
                                 "time: %.2fs",
                                 static_cast<long long>(v.step), v.loss, v.perplexity,
                                 with_commas(static_cast<double>(v.targets)).c_str(),
                                 static_cast<long long>(v.batches), v.seconds);
  return used > 0 ? line : "";
}

void MetricsLogger::record_validation(const ValidationMetrics& v) {
  validations_.push_back(v);
  const std::string line = format_validation_line(v);
  const std::string text = log_rank_tag().empty() ? line : log_rank_tag() + " " + line;
  if (options_.console) {
    std::printf("%s\n", text.c_str());
    std::fflush(stdout);
  }
  log_tee_line(text);
  if (jsonl_) {
    jsonl_->write(nlohmann::ordered_json{{"kind", "validation"}, {"step", v.step}, {"loss", v.loss},
                                         {"perplexity", v.perplexity}, {"targets", v.targets},
                                         {"batches", v.batches}, {"seconds", v.seconds}});
  }
  if (tensorboard_) {
    tensorboard_->add_scalars({{"validation/loss", v.loss}, {"validation/perplexity", v.perplexity}}, v.step);
    tensorboard_->flush();
  }
}

void MetricsLogger::finish() {
  if (history_.empty() || !options_.files) return;
  std::vector<int64_t> steps;
  std::vector<double> losses;
  for (const StepMetrics& m : history_) {
    steps.push_back(m.step);
    losses.push_back(m.loss);
  }
  LossSeries validation{"validation", {}, {}};
  for (const ValidationMetrics& v : validations_) {
    validation.steps.push_back(v.step);
    validation.losses.push_back(v.loss);
  }
  write_loss_plot_svg((std::filesystem::path(options_.dump_folder) / "loss.svg").string(), steps, losses,
                      options_.run_name, {}, validation);
  if (tensorboard_) tensorboard_->flush();
}

}  // namespace titan::train
