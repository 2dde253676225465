// JobConfig: everything a training run reads, as plain structs with defaults, plus the field table
// (path, type, help, default) that the TOML reader, the CLI flags, `titan train --help` and the
// effective-config dump all derive from.
//
// A field's dotted path ("training.steps") is its TOML [section] + key and its CLI flag
// (--training.steps). The table is visit_fields() below: one explicit line per field, so adding a
// field to a struct without a line here is caught by config_test (defaults of job_config_fields()
// vs a default JobConfig, and the to_toml round trip).
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "titan/config/config_error.h"

namespace titan::config {

struct JobSection {
  std::string dump_folder = "./outputs";
  std::string config_file = "";
  std::string description = "";

  bool operator==(const JobSection&) const = default;
};

struct ModelSection {
  std::string name = "debug";
  std::string hf_path = "";  // a downloaded model folder: fills hf_assets_path, name and the initial load
  std::string hf_assets_path = "";
  int64_t n_layers = 0;  // 0 = the spec's depth
  // Mixture of experts (torchtitan's moe_args); 0 / "" / < 0 keep the spec's or config.json's value.
  int64_t num_experts = 0;
  int64_t top_k = 0;
  std::string load_balance = "";
  double router_aux_loss_coef = -1.0;
  double load_balance_coeff = 1e-3;

  bool operator==(const ModelSection&) const = default;
};

struct TrainingSection {
  int64_t steps = 1000;
  int64_t local_batch_size = 8;
  int64_t global_batch_size = -1;
  int64_t seq_len = 2048;
  double max_norm = 1.0;
  int64_t seed = 0;
  bool deterministic = false;
  std::string dataset = "quickstart";
  std::string dataset_path = "";
  std::string mixed_precision_param = "float32";   // float32 | bfloat16: the dtype modules compute with
  std::string mixed_precision_reduce = "float32";  // float32 | bfloat16: FSDP's gradient reduce-scatter
  std::string dataset_format = "text";  // text | chat | pretokenized | auto (data/row_format.h)
  bool mask_non_assistant = true;       // chat: loss only on assistant tokens
  std::string dataset_text_field = "text";  // JSONL / Parquet text data: the field holding each document
  bool dataset_skip_bad_lines = false;      // count and skip bad input lines instead of stopping
  std::string chat_messages_field = "";  // chat: the list of messages ("" = detect)
  std::string chat_role_key = "";        // chat: a message's role key ("" = role or from)
  std::string chat_content_key = "";     // chat: a message's text key ("" = content, value or text)
  std::string chat_role_map = "";        // chat: FROM=TO,... before the built-in map

  bool operator==(const TrainingSection&) const = default;
};

struct OptimizerSection {
  std::string name = "AdamW";
  double lr = 8e-4;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  std::string state_dtype = "float32";  // the AdamW moments' storage: float32 or bfloat16
  // Muon (name = "Muon"): the hidden matrices by Muon, the rest by AdamW (train/muon.h).
  std::string muon_params = "auto";  // which parameters Muon takes: auto, or FQN globs (comma-separated)
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  int64_t muon_ns_steps = 5;
  std::string muon_adjust_lr = "match_rms_adamw";  // original | match_rms_adamw | spectral_unclamped

  bool operator==(const OptimizerSection&) const = default;
};

struct LrSchedulerSection {
  int64_t warmup_steps = 200;
  double decay_ratio = -1.0;
  std::string decay_type = "linear";
  double min_lr_factor = 0.0;

  bool operator==(const LrSchedulerSection&) const = default;
};

struct MetricsSection {
  int64_t log_freq = 10;
  bool enable_tensorboard = false;
  bool enable_jsonl = true;
  std::string save_tb_folder = "tb";
  double peak_tflops = 0.0;

  bool operator==(const MetricsSection&) const = default;
};

// torchtitan's [validation]: a forward-only pass over a held-out set every `freq` steps and after
// the last step. 0 for local_batch_size / seq_len means the training value.
struct ValidationSection {
  bool enable = false;
  std::string dataset_path = "";
  int64_t freq = 500;
  int64_t steps = -1;  // batches per pass; -1 = the whole set
  int64_t local_batch_size = 0;
  int64_t seq_len = 0;

  bool operator==(const ValidationSection&) const = default;
};

struct CheckpointSection {
  bool enable = false;
  std::string folder = "checkpoint";
  int64_t interval = 500;
  int64_t keep_latest_k = 0;
  std::string initial_load_path = "";
  bool initial_load_in_hf = false;
  bool initial_load_model_only = true;
  bool last_save_in_hf = false;
  bool last_save_in_hf_overwrite = false;
  bool last_save_model_only = true;
  bool last_save_in_gguf = false;
  std::string gguf_dtype = "f16";
  std::string export_dtype = "float32";
  std::string max_shard_size = "5GB";
  std::string async_mode = "disabled";
  int64_t load_step = -1;

  bool operator==(const CheckpointSection&) const = default;
};

struct ParallelismSection {
  int64_t data_parallel_replicate_degree = 1;
  int64_t data_parallel_shard_degree = -1;
  int64_t tensor_parallel_degree = 1;
  int64_t expert_parallel_degree = 1;
  bool enable_sequence_parallel = true;
  bool fsdp_prefetch = true;
  int64_t pipeline_parallel_degree = 1;
  std::string pipeline_parallel_schedule = "1F1B";
  int64_t pipeline_parallel_microbatch_size = 1;
  int64_t pipeline_parallel_layers_per_stage = -1;
  std::string pipeline_parallel_split_points = "";

  bool operator==(const ParallelismSection&) const = default;
};

struct ActivationCheckpointSection {
  std::string mode = "none";
  std::string selective_ac_option = "2";

  bool operator==(const ActivationCheckpointSection&) const = default;
};

struct OverrideSection {
  std::string imports = "";

  bool operator==(const OverrideSection&) const = default;
};

// LoRA fine-tuning (nn/lora.h): rank > 0 freezes the base model and trains adapters on the
// target modules.
struct LoraSection {
  int64_t rank = 0;
  double alpha = 16.0;
  double dropout = 0.0;
  std::string target_modules = "all-linear";
  std::string target_parameters = "";  // PEFT's: the MoE experts' fused weights
  std::string save_adapter = "";
  bool save_adapter_overwrite = false;
  std::string base_quantization = "none";  // none | nf4 | int8 | gguf: how the frozen base's linear weights are stored

  bool operator==(const LoraSection&) const = default;
};

// Collectives (parallel/comm.h): one that waits longer than timeout_seconds for the other ranks
// ends the job, naming the call and its ranks (NCCL's watchdog; torchtitan's
// comm.train_timeout_seconds). 0 waits forever.
struct CommSection {
  int64_t timeout_seconds = 600;

  bool operator==(const CommSection&) const = default;
};

struct JobConfig {
  JobSection job;
  ModelSection model;
  TrainingSection training;
  OptimizerSection optimizer;
  LrSchedulerSection lr_scheduler;
  MetricsSection metrics;
  ValidationSection validation;
  CheckpointSection checkpoint;
  ParallelismSection parallelism;
  ActivationCheckpointSection activation_checkpoint;
  OverrideSection overrides;  // [override]
  LoraSection lora;
  CommSection comm;

  bool operator==(const JobConfig&) const = default;
};

// The field table. Calls v(path, field, help) for every field, sections in JobConfig order; `field`
// is a (const when `c` is const) bool, int64_t, double or std::string reference.
template <class Config, class V>
  requires std::is_same_v<std::remove_const_t<Config>, JobConfig>
void visit_fields(Config& c, V&& v) {
  auto& job = c.job;
  v("job.dump_folder", job.dump_folder, "folder for everything the run writes (logs, metrics, checkpoints)");
  v("job.config_file", job.config_file,
    "TOML file applied after the config function and before CLI flags (read first wherever it appears); a "
    "regular file of at most 4 MiB");
  v("job.description", job.description, "free text, saved with the effective config");

  auto& model = c.model;
  v("model.name", model.name,
    "Qwen3 spec: debug, 0.6B, 1.7B, 4B, 8B, 14B, 32B, 30B-A3B, 235B-A22B or debug_moe; empty: model.hf_assets_path/config.json");
  v("model.hf_path", model.hf_path,
    "a model folder as published (config.json, *.safetensors, tokenizer.json): the tokenizer (model.hf_assets_path), "
    "the shape (model.name empty: its config.json) and the initial weights (checkpoint.initial_load_path with "
    "initial_load_in_hf); each of those fields wins when also given");
  v("model.hf_assets_path", model.hf_assets_path, "folder with tokenizer.json (+ later config.json/safetensors)");
  v("model.n_layers", model.n_layers, "decoder layers; 0 = the spec's depth (fewer for quick experiments)");
  v("model.num_experts", model.num_experts, "experts per MoE layer; 0 = the spec's (MoE specs and config.json only)");
  v("model.top_k", model.top_k, "experts each token is routed to (num_experts_per_tok); 0 = the spec's");
  v("model.load_balance", model.load_balance,
    "MoE load balancing: none, aux_loss (HF router_aux_loss_coef x aux added to the loss) or bias (torchtitan's "
    "per-expert selection bias); empty = the spec's (config.json: aux_loss iff output_router_logits)");
  v("model.router_aux_loss_coef", model.router_aux_loss_coef,
    "weight of the aux loss with load_balance=aux_loss; < 0 = the spec's or config.json's (0.001 for Qwen3 MoE)");
  v("model.load_balance_coeff", model.load_balance_coeff,
    "step size of the expert-bias update with load_balance=bias (torchtitan's load_balance_coeff)");

  auto& training = c.training;
  v("training.steps", training.steps, "optimizer steps to run");
  v("training.local_batch_size", training.local_batch_size, "sequences per rank in one micro-batch");
  v("training.global_batch_size", training.global_batch_size,
    "-1: local_batch_size x data-parallel degree (no accumulation); else a multiple of it, the rest by "
    "gradient accumulation");
  v("training.seq_len", training.seq_len, "tokens per sequence (documents are packed to this length)");
  v("training.max_norm", training.max_norm, "clip the global gradient L2 norm to this; <= 0 disables clipping");
  v("training.seed", training.seed, "seed for weight init and anything else random");
  v("training.deterministic", training.deterministic,
    "bit-reproducible runs (same losses on a rerun), at some cost in speed");
  v("training.dataset", training.dataset,
    "built-in dataset name ('quickstart': titan's own docs and sources, built into the binary) when "
    "dataset_path is empty");
  v("training.dataset_path", training.dataset_path, "a .txt/.jsonl(.zst)/.parquet file or a folder of them (a Hub dataset's data/); overrides dataset");
  v("training.mixed_precision_param", training.mixed_precision_param,
    "compute dtype: float32, or bfloat16 (GEMMs on bf16 operands with f32 accumulation; f32 master weights, "
    "gradients and AdamW state; checkpoints and exports unchanged)");
  v("training.mixed_precision_reduce", training.mixed_precision_reduce,
    "dtype of FSDP's gradient reduce-scatter: float32 or bfloat16 (half the traffic)");
  v("training.dataset_format", training.dataset_format,
    "text: documents (the JSONL/Parquet 'text' field, .txt); chat: rows in the OpenAI ({\"messages\": [{\"role\", "
    "\"content\"}, ...]}), ShareGPT (conversations: [{from, value}]) or Alpaca (instruction, input, output) layout, "
    "rendered with model.hf_assets_path's chat_template; pretokenized: rows of input_ids [+ labels, -100 masked]; "
    "auto: whichever the first row's fields say");
  v("training.mask_non_assistant", training.mask_non_assistant,
    "chat data: labels -100 except on assistant tokens (their content and end-of-turn marker); false trains on "
    "every token");
  v("training.dataset_text_field", training.dataset_text_field,
    "JSONL text data: the string field holding each document (C4: text)");
  v("training.chat_messages_field", training.chat_messages_field,
    "chat data: the row's list of messages (empty: detect messages, conversations or conversation)");
  v("training.chat_role_key", training.chat_role_key, "chat data: a message's role key (empty: role, else from)");
  v("training.chat_content_key", training.chat_content_key,
    "chat data: a message's text key (empty: content, else value, else text)");
  v("training.chat_role_map", training.chat_role_map,
    "chat data: FROM=TO,... role names mapped before the built-in map (human=user, gpt=assistant, model=assistant, "
    "function_call=assistant, observation=tool)");
  v("training.dataset_skip_bad_lines", training.dataset_skip_bad_lines,
    "count and skip bad input lines (malformed JSON, invalid UTF-8, a missing field) instead of stopping at the first");

  auto& optimizer = c.optimizer;
  v("optimizer.name", optimizer.name,
    "AdamW | Muon (Muon for the hidden layers' matrices, AdamW for the rest: embeddings, head, norms, biases)");
  v("optimizer.lr", optimizer.lr, "peak learning rate, reached at the end of warmup");
  v("optimizer.beta1", optimizer.beta1, "AdamW decay rate of the first moment (mean of gradients)");
  v("optimizer.beta2", optimizer.beta2, "AdamW decay rate of the second moment (mean of squared gradients)");
  v("optimizer.eps", optimizer.eps, "AdamW epsilon, added to the square root of the second moment");
  v("optimizer.weight_decay", optimizer.weight_decay, "decoupled weight decay: each step, param -= lr x weight_decay x param");
  v("optimizer.state_dtype", optimizer.state_dtype,
    "float32 | bfloat16: how the AdamW moments are stored (bfloat16: 4 bytes per parameter instead of 8, "
    "updated in f32 and rounded to nearest even; checkpoints keep them as stored)");
  v("optimizer.muon_params", optimizer.muon_params,
    "Muon: the parameters it takes: auto (every 2-D weight of the transformer blocks and their stacked "
    "[experts, out, in] weights) or comma-separated FQN globs such as layers.*.attention.w*.weight");
  v("optimizer.muon_momentum", optimizer.muon_momentum, "Muon: momentum of the update (torch.optim.Muon's, 0.95)");
  v("optimizer.muon_nesterov", optimizer.muon_nesterov, "Muon: Nesterov momentum");
  v("optimizer.muon_ns_steps", optimizer.muon_ns_steps,
    "Muon: Newton-Schulz iterations of the orthogonalisation (torch's coefficients, 5 steps)");
  v("optimizer.muon_adjust_lr", optimizer.muon_adjust_lr,
    "Muon: the per-matrix lr of an A x B weight: match_rms_adamw (0.2 sqrt(max(A, B)): optimizer.lr and "
    "weight_decay serve both groups, Moonlight), original (sqrt(max(1, A/B))) or spectral_unclamped (sqrt(A/B))");

  auto& lr_scheduler = c.lr_scheduler;
  v("lr_scheduler.warmup_steps", lr_scheduler.warmup_steps, "steps of linear warmup up to optimizer.lr");
  v("lr_scheduler.decay_ratio", lr_scheduler.decay_ratio,
    "fraction of steps spent decaying; -1: every step after warmup (torchtitan's None)");
  v("lr_scheduler.decay_type", lr_scheduler.decay_type, "shape of the decay: linear, sqrt or cosine");
  v("lr_scheduler.min_lr_factor", lr_scheduler.min_lr_factor, "lr at the end of decay, as a fraction of optimizer.lr");

  auto& metrics = c.metrics;
  v("metrics.log_freq", metrics.log_freq, "log metrics every N steps");
  v("metrics.enable_tensorboard", metrics.enable_tensorboard, "write TensorBoard event files");
  v("metrics.enable_jsonl", metrics.enable_jsonl, "write one JSON line of metrics per logged step");
  v("metrics.save_tb_folder", metrics.save_tb_folder, "TensorBoard folder, inside job.dump_folder");
  v("metrics.peak_tflops", metrics.peak_tflops, "device peak for MFU; 0 = measure (cached when the machine is quiet)");

  auto& validation = c.validation;
  v("validation.enable", validation.enable,
    "run a forward-only validation pass every validation.freq steps and after the last step");
  v("validation.dataset_path", validation.dataset_path,
    "the held-out set: a .txt/.jsonl(.zst) file or a folder of them, read like training.dataset_path");
  v("validation.freq", validation.freq, "validate every N steps (and after the last step)");
  v("validation.steps", validation.steps,
    "batches per validation pass, from the start of the set each time; -1 = the whole set");
  v("validation.local_batch_size", validation.local_batch_size,
    "sequences per data-parallel rank in one validation batch; 0 = training.local_batch_size");
  v("validation.seq_len", validation.seq_len, "tokens per validation sequence; 0 = training.seq_len");

  auto& checkpoint = c.checkpoint;
  v("checkpoint.enable", checkpoint.enable, "save checkpoints");
  v("checkpoint.folder", checkpoint.folder, "checkpoint folder, inside job.dump_folder");
  v("checkpoint.interval", checkpoint.interval, "save every N steps");
  v("checkpoint.keep_latest_k", checkpoint.keep_latest_k,
    "keep only the newest k resumable (full) checkpoints; 0 keeps all. Model-only final saves are kept and "
    "not counted");
  v("checkpoint.initial_load_path", checkpoint.initial_load_path,
    "checkpoint (native step folder, or an HF folder with initial_load_in_hf) to start from when checkpoint.folder "
    "has none; empty: fresh init");
  v("checkpoint.initial_load_in_hf", checkpoint.initial_load_in_hf,
    "initial_load_path is a Hugging Face folder (config.json + *.safetensors)");
  v("checkpoint.initial_load_model_only", checkpoint.initial_load_model_only,
    "load only the weights from initial_load_path (not optimizer, schedule, data cursor or step)");
  v("checkpoint.last_save_in_hf", checkpoint.last_save_in_hf,
    "at the end of training, also export an HF folder (config.json, safetensors, tokenizer) to <folder>/hf, "
    "replacing an earlier export there (a folder of other files is refused)");
  v("checkpoint.last_save_in_hf_overwrite", checkpoint.last_save_in_hf_overwrite,
    "let the HF export replace <folder>/hf even when it holds files that are not an HF model folder");
  v("checkpoint.last_save_model_only", checkpoint.last_save_model_only,
    "the final save holds the weights only (no optimizer state)");
  v("checkpoint.last_save_in_gguf", checkpoint.last_save_in_gguf,
    "at the end of training, also write the model (LoRA merged) as one GGUF file <folder>/model.gguf for "
    "llama.cpp / Ollama, with the run's tokenizer; replaces an earlier GGUF there, nothing else");
  v("checkpoint.gguf_dtype", checkpoint.gguf_dtype, "weights of the GGUF export: f32, f16, bf16 or q8_0");
  v("checkpoint.export_dtype", checkpoint.export_dtype, "dtype of exported weights: float32 or bfloat16");
  v("checkpoint.max_shard_size", checkpoint.max_shard_size,
    "largest safetensors shard of an HF export, e.g. 5GB, 500MB; larger models are split with an index");
  v("checkpoint.async_mode", checkpoint.async_mode,
    "disabled: save on the training thread; async: copy the state, write it on a background thread");
  v("checkpoint.load_step", checkpoint.load_step, "resume from this step's checkpoint; -1: the newest valid one");
  auto& parallelism = c.parallelism;
  v("parallelism.data_parallel_replicate_degree", parallelism.data_parallel_replicate_degree,
    "HSDP replicas: data-parallel groups that each hold a whole sharded copy (gradients all-reduced across them)");
  v("parallelism.data_parallel_shard_degree", parallelism.data_parallel_shard_degree,
    "FSDP degree: ranks that split parameters, gradients and optimizer state; -1: the ranks left over");
  v("parallelism.tensor_parallel_degree", parallelism.tensor_parallel_degree,
    "tensor-parallel degree (Megatron: heads, FFN width and vocabulary split; must divide each)");
  v("parallelism.expert_parallel_degree", parallelism.expert_parallel_degree,
    "expert-parallel degree (MoE): experts split over groups of this many data_parallel_shard ranks, tokens "
    "exchanged all-to-all; must divide data_parallel_shard_degree and num_experts");
  v("parallelism.enable_sequence_parallel", parallelism.enable_sequence_parallel,
    "with tensor_parallel_degree > 1: norms and residuals on each rank's share of the tokens");
  v("parallelism.fsdp_prefetch", parallelism.fsdp_prefetch,
    "FSDP: start the next block's all-gather before the current block runs (forward and backward)");
  v("parallelism.pipeline_parallel_degree", parallelism.pipeline_parallel_degree,
    "pipeline stages across ranks (outermost mesh dimension): each rank holds its stages' layers; 1: off");
  v("parallelism.pipeline_parallel_schedule", parallelism.pipeline_parallel_schedule,
    "GPipe, 1F1B (one stage per rank) or Interleaved1F1B (several stages per rank)");
  v("parallelism.pipeline_parallel_microbatch_size", parallelism.pipeline_parallel_microbatch_size,
    "rows per pipeline micro-batch: each local batch runs as local_batch_size / this micro-batches");
  v("parallelism.pipeline_parallel_layers_per_stage", parallelism.pipeline_parallel_layers_per_stage,
    "layers per pipeline stage; -1: split_points, else one stage per rank (two with Interleaved1F1B)");
  v("parallelism.pipeline_parallel_split_points", parallelism.pipeline_parallel_split_points,
    "first layer of each stage after the first, comma-separated, e.g. layers.2,layers.4 (overrides layers_per_stage)");

  auto& ac = c.activation_checkpoint;
  v("activation_checkpoint.mode", ac.mode,
    "what each block keeps for its backward: none (everything), full (its input only; the forward is replayed), "
    "selective (see selective_ac_option); every mode trains the same bits");
  v("activation_checkpoint.selective_ac_option", ac.selective_ac_option,
    "with mode=selective: 'op' (keep GEMM and attention outputs, recompute norms, RoPE and SwiGLU) or an integer N "
    "(fully checkpoint every N-th block)");

  auto& overrides = c.overrides;
  v("override.imports", overrides.imports,
    "plugin shared libraries to load, comma-separated; their overrides replace config-tree nodes (each logged)");

  auto& lora = c.lora;
  v("lora.rank", lora.rank, "LoRA rank; > 0 freezes the base model and trains low-rank adapters on target_modules; 0: off");
  v("lora.alpha", lora.alpha, "LoRA alpha: the update is scaled by alpha / rank (PEFT's lora_alpha)");
  v("lora.dropout", lora.dropout,
    "dropout on the adapters' input in training (PEFT's lora_dropout): each element zeroed with this probability, "
    "the rest scaled by 1 / (1 - p); masks drawn from training.seed, the step and the micro-batch");
  v("lora.target_modules", lora.target_modules,
    "comma-separated PEFT names (q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj), all-linear, or "
    "config-tree globs (layers.*.attention.wq)");
  v("lora.target_parameters", lora.target_parameters,
    "PEFT's target_parameters: mlp.experts.gate_up_proj,mlp.experts.down_proj adapts every MoE layer's experts "
    "(their fused gate/up and down stacks); empty: none. lora.target_modules may then be empty");
  v("lora.save_adapter", lora.save_adapter,
    "at the end, write a PEFT adapter folder (adapter_config.json + adapter_model.safetensors) here; relative paths "
    "are inside job.dump_folder; an existing folder is replaced only when it is an earlier adapter (never the "
    "dump or checkpoint folder, the base model or the data); empty: none");
  v("lora.base_quantization", lora.base_quantization,
    "none | nf4 | int8 | gguf: store the frozen base's linear weights quantized as bitsandbytes does (QLoRA: NF4 in "
    "blocks of 64 with an absmax each, ~0.56 bytes a weight; int8 per output row, ~1 byte), quantized while "
    "loading and decoded at each use; the merged HF export decodes them (lossy by the quantization error); "
    "gguf: keep a GGUF base's own blocks (q4_K, q6_K, q8_0, ...) as the file stores them, no requantization");
  v("lora.save_adapter_overwrite", lora.save_adapter_overwrite,
    "let lora.save_adapter replace a folder that holds files other than an adapter (titan convert's --overwrite)");

  auto& comm = c.comm;
  v("comm.timeout_seconds", comm.timeout_seconds,
    "a collective waiting longer than this for the other ranks (one stalled, stopped or dead) ends the job, naming "
    "the call and its ranks; 0: wait forever");
}

enum class FieldType { boolean, integer, number, string };

struct Field {
  std::string path;           // "training.steps"
  FieldType type;
  std::string help;           // one line
  std::string default_value;  // as text (get_field of a default-constructed JobConfig)
};

// Every field, in visit_fields order (sections as in JobConfig).
const std::vector<Field>& job_config_fields();

// "boolean", "integer", "number", "string".
const char* field_type_name(FieldType type);

// The field at `path`, or nullptr.
const Field* find_field(const std::string& path);

// A field's value as text: booleans "true"/"false", integers in decimal, numbers as the shortest
// text that parses back to the same double, strings verbatim. ConfigError on an unknown path.
std::string get_field(const JobConfig& config, const std::string& path);

// Parses `text` by the field's type and stores it. Integers: "10", "-1", "+3"; numbers: "8e-4",
// "1", ".5"; booleans: true/false, 1/0, yes/no (any case); strings: verbatim.
// ConfigError on an unknown path (naming the nearest field) or a value that does not parse:
// "training.steps: 'abc' is not an integer".
void set_field(JobConfig& config, const std::string& path, const std::string& text);

// The field path closest to `path` by edit distance (Levenshtein), also matching on the last
// component alone ("steps" -> "training.steps", "train.lr" -> "optimizer.lr"); "" when nothing is
// close. (Also declared for overrides.h users: it includes this header.)
std::string nearest_field(const std::string& path);

}  // namespace titan::config
