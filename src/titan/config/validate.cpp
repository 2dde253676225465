#include "titan/config/validate.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "titan/config/value_text.h"
#include "titan/data/row_format.h"

namespace titan::config {

namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return text;
}

// "<path>=<value> <problem>" in the shortest number form, so that messages show what was set.
std::string shown(double value) { return format_double(value); }

constexpr int64_t kMaxLayers = 4096;
constexpr int64_t kMaxTokensPerMicroBatch = int64_t{1} << 31;
constexpr int64_t kMaxGlobalBatch = int64_t{1} << 24;

void check_batch(const TrainingSection& t, int64_t dp) {
  if (dp < 1) config_fail("data-parallel degree ", dp, " must be >= 1 (internal: the caller passes the rank count)");
  if (t.global_batch_size == -1) return;
  const int64_t per_step = t.local_batch_size * dp;
  if (t.global_batch_size <= 0 || t.global_batch_size % per_step != 0) {
    config_fail("training.global_batch_size=", t.global_batch_size, " is not a multiple of local_batch_size (",
                t.local_batch_size, ") x data-parallel degree (", dp, ") = ", per_step, "; set it to ", per_step, ", ",
                2 * per_step, ", ... or -1");
  }
}

// The pipeline fields on their own and with the batch; the split of the model's layers is checked
// by parallel::pipeline_layout once the model is known.
void validate_pipeline(const JobConfig& c) {
  const ParallelismSection& p = c.parallelism;
  if (p.pipeline_parallel_degree < 1) {
    config_fail("parallelism.pipeline_parallel_degree=", p.pipeline_parallel_degree, " must be >= 1 (1: no pipeline)");
  }
  const std::string schedule = lower(p.pipeline_parallel_schedule);
  if (schedule != "gpipe" && schedule != "1f1b" && schedule != "interleaved1f1b") {
    config_fail("parallelism.pipeline_parallel_schedule='", p.pipeline_parallel_schedule,
                "' is unknown; use GPipe, 1F1B or Interleaved1F1B");
  }
  if (p.pipeline_parallel_microbatch_size < 1) {
    config_fail("parallelism.pipeline_parallel_microbatch_size=", p.pipeline_parallel_microbatch_size, " must be >= 1");
  }
  if (p.pipeline_parallel_layers_per_stage != -1 && p.pipeline_parallel_layers_per_stage < 1) {
    config_fail("parallelism.pipeline_parallel_layers_per_stage=", p.pipeline_parallel_layers_per_stage,
                " must be >= 1, or -1 (split_points, else one stage per rank)");
  }
  if (p.pipeline_parallel_degree == 1) return;
  if (c.training.local_batch_size % p.pipeline_parallel_microbatch_size != 0) {
    config_fail("parallelism.pipeline_parallel_microbatch_size=", p.pipeline_parallel_microbatch_size,
                " does not divide training.local_batch_size=", c.training.local_batch_size,
                "; the local batch runs as micro-batches of that many rows");
  }
}

}  // namespace

bool uses_muon(const OptimizerSection& optimizer) { return lower(optimizer.name) == "muon"; }

int64_t accumulation_steps(const JobConfig& config, int64_t data_parallel_degree) {
  const TrainingSection& t = config.training;
  if (t.local_batch_size < 1) config_fail("training.local_batch_size=", t.local_batch_size, " must be >= 1");
  check_batch(t, data_parallel_degree);
  if (t.global_batch_size == -1) return 1;
  return t.global_batch_size / (t.local_batch_size * data_parallel_degree);
}

int64_t parse_byte_size(const std::string& text) {
  size_t used = 0;
  double value = 0.0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return -1;
  }
  std::string unit = text.substr(used);
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  for (char& ch : unit) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  double scale = 0.0;
  if (unit.empty() || unit == "B") scale = 1.0;
  else if (unit == "KB") scale = 1e3;
  else if (unit == "MB") scale = 1e6;
  else if (unit == "GB") scale = 1e9;
  else if (unit == "KIB") scale = 1024.0;
  else if (unit == "MIB") scale = 1024.0 * 1024.0;
  else if (unit == "GIB") scale = 1024.0 * 1024.0 * 1024.0;
  if (scale == 0.0 || !(value > 0.0) || !std::isfinite(value * scale) || value * scale > 9e18) return -1;
  return static_cast<int64_t>(value * scale);
}

void validate(const JobConfig& c, int64_t data_parallel_degree) {
  const TrainingSection& t = c.training;
  if (c.job.dump_folder.empty()) config_fail("job.dump_folder is empty; set a folder, e.g. --job.dump_folder ./outputs");
  if (c.model.name.empty() && c.model.hf_assets_path.empty()) {
    config_fail("model.name and model.hf_assets_path are both empty; set a spec such as debug or 0.6B, or an HF "
                "folder whose config.json defines the model");
  }
  if (c.model.n_layers < 0) config_fail("model.n_layers=", c.model.n_layers, " must be >= 0 (0 = the spec's depth)");
  if (c.model.n_layers > kMaxLayers) {
    config_fail("model.n_layers=", c.model.n_layers, " is more than ", kMaxLayers,
                " layers (the deepest published models have ~130); titan builds every layer, even to plan");
  }
  const ModelSection& model = c.model;
  if (model.num_experts < 0) config_fail("model.num_experts=", model.num_experts, " must be >= 0 (0 = the spec's)");
  if (model.top_k < 0) config_fail("model.top_k=", model.top_k, " must be >= 0 (0 = the spec's)");
  if (!model.load_balance.empty() && model.load_balance != "none" && model.load_balance != "aux_loss" && model.load_balance != "bias") {
    config_fail("model.load_balance='", model.load_balance, "' is unknown; use none, aux_loss, bias, or empty for the spec's");
  }
  if (!(model.load_balance_coeff >= 0) || !std::isfinite(model.load_balance_coeff)) {
    config_fail("model.load_balance_coeff=", shown(model.load_balance_coeff),
                " must be >= 0 (the expert-bias update rate); torchtitan uses 1e-3");
  }

  if (t.steps < 1) config_fail("training.steps=", t.steps, " must be >= 1");
  if (t.local_batch_size < 1) config_fail("training.local_batch_size=", t.local_batch_size, " must be >= 1");
  if (t.seq_len < 2) config_fail("training.seq_len=", t.seq_len, " must be >= 2 (an input token and its label)");
  if (t.global_batch_size != -1 && t.global_batch_size < 1) {
    config_fail("training.global_batch_size=", t.global_batch_size, " must be -1 or a positive multiple of ",
                "local_batch_size x data-parallel degree");
  }
  // Sizes whose products index buffers and count micro-steps: far past any real run, they would
  // overflow or allocate before anything else could say why.
  if (t.local_batch_size > kMaxTokensPerMicroBatch / t.seq_len) {
    config_fail("training.local_batch_size=", t.local_batch_size, " x seq_len=", t.seq_len, " is more than 2^31 tokens "
                "in one micro-batch; lower them (training.global_batch_size accumulates micro-batches)");
  }
  if (t.global_batch_size > kMaxGlobalBatch) {
    config_fail("training.global_batch_size=", t.global_batch_size, " is more than ", kMaxGlobalBatch,
                " sequences per step; large runs use a few thousand");
  }
  check_batch(t, data_parallel_degree);
  if (std::isnan(t.max_norm)) config_fail("training.max_norm is nan; set a positive norm, or <= 0 to disable clipping");
  for (const auto& [name, value] : {std::pair<const char*, const std::string&>{"mixed_precision_param", t.mixed_precision_param},
                                    {"mixed_precision_reduce", t.mixed_precision_reduce}}) {
    if (value != "float32" && value != "bfloat16") {
      config_fail("training.", name, "='", value, "' is not float32 or bfloat16");
    }
  }

  if (t.dataset_format != "text" && t.dataset_format != "chat" && t.dataset_format != "pretokenized" &&
      t.dataset_format != "auto") {
    config_fail("training.dataset_format='", t.dataset_format, "' is not text, chat, pretokenized or auto");
  }
  if ((t.dataset_format == "chat" || t.dataset_format == "pretokenized") && t.dataset_path.empty()) {
    config_fail("training.dataset_format=", t.dataset_format, " needs training.dataset_path (a .jsonl(.zst)/.parquet ",
                "file or folder); the built-in dataset is text");
  }
  try {
    data::parse_role_map(t.chat_role_map);
  } catch (const Error& e) {
    config_fail(e.what());
  }
  if (t.dataset_path.empty() && t.dataset != "quickstart") {
    config_fail("training.dataset='", t.dataset, "' is not a built-in dataset (known: quickstart); use quickstart ",
                "or set training.dataset_path to a .txt/.jsonl(.zst) file or folder");
  }

  const OptimizerSection& o = c.optimizer;
  if (lower(o.name) != "adamw" && lower(o.name) != "muon") {
    config_fail("optimizer.name='", o.name, "' is not supported; use AdamW or Muon");
  }
  if (!(o.lr > 0) || !std::isfinite(o.lr)) config_fail("optimizer.lr=", shown(o.lr), " must be a finite number > 0");
  if (!(o.beta1 >= 0 && o.beta1 < 1)) config_fail("optimizer.beta1=", shown(o.beta1), " must be in [0, 1), e.g. 0.9");
  if (!(o.beta2 >= 0 && o.beta2 < 1)) config_fail("optimizer.beta2=", shown(o.beta2), " must be in [0, 1), e.g. 0.95");
  if (!(o.eps > 0) || !std::isfinite(o.eps)) config_fail("optimizer.eps=", shown(o.eps), " must be a finite number > 0, e.g. 1e-8");
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay)) {
    config_fail("optimizer.weight_decay=", shown(o.weight_decay), " must be >= 0 (0 disables weight decay)");
  }
  if (o.state_dtype != "float32" && o.state_dtype != "bfloat16") {
    config_fail("optimizer.state_dtype='", o.state_dtype, "' is not float32 or bfloat16");
  }
  if (!(o.muon_momentum >= 0 && o.muon_momentum < 1)) {
    config_fail("optimizer.muon_momentum=", shown(o.muon_momentum), " must be in [0, 1), e.g. 0.95");
  }
  if (o.muon_ns_steps < 1 || o.muon_ns_steps > 99) {
    config_fail("optimizer.muon_ns_steps=", o.muon_ns_steps, " must be in 1..99 (torch.optim.Muon uses 5)");
  }
  if (o.muon_adjust_lr != "original" && o.muon_adjust_lr != "match_rms_adamw" &&
      o.muon_adjust_lr != "spectral_unclamped") {
    config_fail("optimizer.muon_adjust_lr='", o.muon_adjust_lr,
                "' is not match_rms_adamw, original or spectral_unclamped");
  }
  if (o.muon_params.empty()) config_fail("optimizer.muon_params is empty; use auto or FQN globs");

  const LrSchedulerSection& s = c.lr_scheduler;
  if (s.warmup_steps < 0) config_fail("lr_scheduler.warmup_steps=", s.warmup_steps, " must be >= 0");
  if (s.decay_ratio != -1.0 && !(s.decay_ratio >= 0 && s.decay_ratio <= 1)) {
    config_fail("lr_scheduler.decay_ratio=", shown(s.decay_ratio),
                " must be in [0, 1], or -1 to decay over every step after warmup");
  }
  if (s.decay_type != "linear" && s.decay_type != "sqrt" && s.decay_type != "cosine") {
    config_fail("lr_scheduler.decay_type='", s.decay_type, "' is unknown; use linear, sqrt or cosine");
  }
  if (!(s.min_lr_factor >= 0 && s.min_lr_factor <= 1)) {
    config_fail("lr_scheduler.min_lr_factor=", shown(s.min_lr_factor), " must be in [0, 1] (a fraction of optimizer.lr)");
  }

  const MetricsSection& m = c.metrics;
  if (m.log_freq < 1) config_fail("metrics.log_freq=", m.log_freq, " must be >= 1 (log every N steps)");
  if (!(m.peak_tflops >= 0) || !std::isfinite(m.peak_tflops)) {
    config_fail("metrics.peak_tflops=", shown(m.peak_tflops), " must be >= 0 (0 = measure, cached when the machine is quiet)");
  }

  const ValidationSection& val = c.validation;
  if (val.enable && val.dataset_path.empty()) {
    config_fail("validation.enable is set but validation.dataset_path is empty; set it to a held-out "
                ".txt/.jsonl(.zst) file or folder, or drop --validation.enable");
  }
  if (val.freq < 1) config_fail("validation.freq=", val.freq, " must be >= 1 (validate every N steps)");
  if (val.steps != -1 && val.steps < 1) {
    config_fail("validation.steps=", val.steps, " must be >= 1 batches, or -1 for the whole validation set");
  }
  if (val.local_batch_size < 0) {
    config_fail("validation.local_batch_size=", val.local_batch_size, " must be >= 1, or 0 for training.local_batch_size");
  }
  if (val.seq_len != 0 && val.seq_len < 2) {
    config_fail("validation.seq_len=", val.seq_len, " must be >= 2 (an input token and its label), or 0 for "
                "training.seq_len");
  }

  const CheckpointSection& k = c.checkpoint;
  if (k.interval < 1) config_fail("checkpoint.interval=", k.interval, " must be >= 1 (save every N steps)");
  if (k.keep_latest_k < 0) config_fail("checkpoint.keep_latest_k=", k.keep_latest_k, " must be >= 0 (0 keeps all)");
  if (k.gguf_dtype != "f32" && k.gguf_dtype != "f16" && k.gguf_dtype != "bf16" && k.gguf_dtype != "q8_0") {
    config_fail("checkpoint.gguf_dtype='", k.gguf_dtype, "' is not f32, f16, bf16 or q8_0");
  }
  if (k.export_dtype != "float32" && k.export_dtype != "bfloat16") {
    config_fail("checkpoint.export_dtype='", k.export_dtype, "' is not float32 or bfloat16");
  }
  if (k.async_mode != "disabled" && k.async_mode != "async") {
    config_fail("checkpoint.async_mode='", k.async_mode, "' is not disabled or async");
  }
  if (k.load_step < -1) config_fail("checkpoint.load_step=", k.load_step, " must be >= 0, or -1 for the newest");
  if (k.initial_load_in_hf && k.initial_load_path.empty()) {
    config_fail("checkpoint.initial_load_in_hf is set but checkpoint.initial_load_path is empty; set it to the HF "
                "folder to load");
  }
  if (parse_byte_size(k.max_shard_size) <= 0) {
    config_fail("checkpoint.max_shard_size='", k.max_shard_size,
                "' is not a size; write e.g. 5GB, 500MB, 2GiB or a byte count");
  }

  const ParallelismSection& p = c.parallelism;
  if (p.data_parallel_replicate_degree < 1) {
    config_fail("parallelism.data_parallel_replicate_degree=", p.data_parallel_replicate_degree, " must be >= 1");
  }
  if (p.data_parallel_shard_degree != -1 && p.data_parallel_shard_degree < 1) {
    config_fail("parallelism.data_parallel_shard_degree=", p.data_parallel_shard_degree,
                " must be >= 1, or -1 for the ranks left over");
  }
  if (p.tensor_parallel_degree < 1) {
    config_fail("parallelism.tensor_parallel_degree=", p.tensor_parallel_degree, " must be >= 1");
  }
  if (p.expert_parallel_degree < 1) {
    config_fail("parallelism.expert_parallel_degree=", p.expert_parallel_degree, " must be >= 1");
  }
  validate_pipeline(c);

  const ActivationCheckpointSection& ac = c.activation_checkpoint;
  if (ac.mode != "none" && ac.mode != "full" && ac.mode != "selective") {
    config_fail("activation_checkpoint.mode='", ac.mode, "' is unknown; use none, full or selective");
  }
  const std::string& option = ac.selective_ac_option;
  const bool block_count = !option.empty() && option.size() < 10 && option.find_first_not_of("0123456789") == std::string::npos;
  if (option != "op" && !block_count) {
    config_fail("activation_checkpoint.selective_ac_option='", option, "' is neither 'op' nor a block count; 'op' "
                "recomputes the cheap ops of every block, an integer N fully checkpoints every N-th block");
  }

  for (const auto& [name, v] : {std::pair<const char*, double>{"model.router_aux_loss_coef", c.model.router_aux_loss_coef},
                                {"model.load_balance_coeff", c.model.load_balance_coeff}}) {
    if (std::fabs(v) > std::numeric_limits<float>::max()) {
      config_fail(name, "=", v, " does not fit the float32 the model computes with (at most ~3.4e38 in size)");
    }
  }

  const LoraSection& lora = c.lora;
  if (lora.rank < 0) config_fail("lora.rank=", lora.rank, " must be >= 0 (0: no LoRA)");
  if (c.comm.timeout_seconds < 0) {
    config_fail("comm.timeout_seconds=", c.comm.timeout_seconds, " must be >= 0 (0: wait forever)");
  }
  if (lora.rank > 0) {
    if (!(lora.alpha > 0.0) || !std::isfinite(lora.alpha)) config_fail("lora.alpha=", lora.alpha, " must be > 0");
    if (!(lora.dropout >= 0.0 && lora.dropout < 1.0)) {
      config_fail("lora.dropout=", lora.dropout, " must be in [0, 1) (the chance of zeroing an adapter input element)");
    }
    if (lora.dropout > 0.0 && c.parallelism.pipeline_parallel_degree > 1) {
      config_fail("lora.dropout=", lora.dropout, " with pipeline parallelism is not supported yet (its micro-batches ",
                  "interleave, and the masks are keyed by the trainer's); use lora.dropout 0 or no pipeline");
    }
  } else if (!lora.save_adapter.empty()) {
    config_fail("lora.save_adapter='", lora.save_adapter, "' needs lora.rank > 0 (there is no adapter to save)");
  }
  if (lora.base_quantization != "none" && lora.base_quantization != "nf4" && lora.base_quantization != "int8" &&
      lora.base_quantization != "gguf") {
    config_fail("lora.base_quantization='", lora.base_quantization, "' is not none, nf4, int8 or gguf");
  }
  if (lora.base_quantization != "none" && lora.rank == 0) {
    config_fail("lora.base_quantization=", lora.base_quantization, " needs lora.rank > 0: only a frozen base is "
                "quantized, and without LoRA every weight trains");
  }
}

void validate_expert_parallel_mesh(const JobConfig& c, int64_t dp_shard) {
  const int64_t ep = c.parallelism.expert_parallel_degree;
  if (ep < 1) config_fail("parallelism.expert_parallel_degree=", ep, " must be >= 1");
  if (dp_shard % ep != 0) {
    config_fail("parallelism.expert_parallel_degree=", ep, " does not divide the data_parallel_shard_degree=",
                dp_shard, " it borrows its ranks from; pick a divisor of it (or shard over more ranks)");
  }
}

void validate_expert_parallel_model(const JobConfig& c, int64_t num_experts) {
  const int64_t ep = c.parallelism.expert_parallel_degree;
  if (ep == 1) return;
  if (num_experts == 0) {
    config_fail("parallelism.expert_parallel_degree=", ep, " but the model has no experts (a dense model); "
                "use a mixture-of-experts model or expert_parallel_degree=1");
  }
  if (num_experts % ep != 0) {
    config_fail("parallelism.expert_parallel_degree=", ep, " does not divide the model's num_experts=", num_experts,
                "; pick a divisor of it");
  }
}

}  // namespace titan::config
