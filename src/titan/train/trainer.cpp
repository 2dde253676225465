#include "titan/train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "titan/checkpoint/atomic_file.h"
#include "titan/checkpoint/output_folder.h"
#include "titan/config/config_error.h"
#include "titan/config/overrides.h"
#include "titan/config/validate.h"
#include "titan/core/allocator.h"
#include "titan/core/clock.h"
#include "titan/core/log.h"
#include "titan/data/builtin_datasets.h"
#include "titan/data/tokenizer/special_tokens.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/flops.h"
#include "titan/nn/lora.h"
#include "titan/ops/softmax_xent/softmax_xent.h"
#include "titan/plugins/lora.h"
#include "titan/plugins/plugin_loader.h"
#include "titan/train/clip.h"
#include "titan/train/memory_check.h"
#include "titan/train/precision.h"
#include "titan/train/stop_signal.h"

namespace titan::train {
namespace {

// A named spec, or (model.name empty) model.hf_assets_path/config.json as AutoConfig reads it.
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

}  // namespace

models::ResolvedModel resolve_model(const config::JobConfig& c) {
  models::ResolvedModel r = models::resolve_model(c.model.name, c.model.hf_assets_path, c.model.n_layers);
  nn::DecoderConfig& m = r.config;
  // Positions past max_position_embeddings were never trained (a scaled RoPE's max_position_embeddings
  // is already the extended length): a longer sequence is refused here, before anything is allocated.
  const std::string model_name = c.model.name.empty() ? c.model.hf_assets_path + "/config.json" : c.model.name;
  for (const auto& [field, len] : {std::pair<const char*, int64_t>{"training.seq_len", c.training.seq_len},
                                   {"validation.seq_len", c.validation.enable ? c.validation.seq_len : 0}}) {
    if (len > m.max_seq_len) {
      config::config_fail(field, "=", len, " is longer than the ", m.max_seq_len, " positions of model '", model_name,
                          "' (max_position_embeddings). HINT: ", field, " <= ", m.max_seq_len);
    }
  }
  const config::ModelSection& o = c.model;
  const bool moe_set = o.num_experts != 0 || o.top_k != 0 || !o.load_balance.empty() || o.router_aux_loss_coef >= 0;
  TITAN_CHECK(!moe_set || m.num_experts > 0, "[model] model.num_experts / top_k / load_balance / "
              "router_aux_loss_coef are set but model '", o.name.empty() ? o.hf_assets_path : o.name,
              "' is dense. HINT: pick a MoE spec (30B-A3B, 235B-A22B, debug_moe) or a Qwen3MoeForCausalLM folder");
  TITAN_CHECK(o.num_experts >= 0 && o.top_k >= 0, "[model] model.num_experts=", o.num_experts, " and model.top_k=",
              o.top_k, " must be >= 0 (0 = the spec's)");
  if (o.num_experts > 0) m.num_experts = o.num_experts;
  if (o.top_k > 0) m.num_experts_per_tok = o.top_k;
  if (!o.load_balance.empty()) m.load_balance = nn::parse_load_balance(o.load_balance);
  if (o.router_aux_loss_coef >= 0) m.router_aux_loss_coef = static_cast<float>(o.router_aux_loss_coef);
  m.bias_update_rate = static_cast<float>(o.load_balance_coeff);
  m.validate();
  return r;
}

Trainer::Trainer(const config::JobConfig& config, std::string config_name)
    : c_(config), config_name_(std::move(config_name)) {}

Trainer::~Trainer() = default;

// `f()`, its titan::Error rethrown as a config error (exit 2): the mesh and the TP split are the
// job config's mistakes, whichever layer finds them.
template <class F>
static auto as_config_error(F&& f) {
  try {
    return f();
  } catch (const config::ConfigError&) {
    throw;
  } catch (const Error& e) {
    throw config::ConfigError(e.what());
  }
}

// The job's ranks and their mesh first: every later check knows the data-parallel degree.
void Trainer::setup_mesh() {
  world_ = &parallel::world_comm();
  parallel::set_collective_timeout(static_cast<double>(c_.comm.timeout_seconds));
  const config::ParallelismSection& ps = c_.parallelism;
  if (ps.pipeline_parallel_degree > 1 && world_->size() % ps.pipeline_parallel_degree != 0) {
    config::config_fail("parallelism.pipeline_parallel_degree=", ps.pipeline_parallel_degree, " does not divide the ",
                        world_->size(), " ranks of the job; launch a multiple of it, or change the degree");
  }
  parallel::MeshDegrees degrees = as_config_error([&] {
    return parallel::resolve_mesh({ps.data_parallel_replicate_degree, ps.data_parallel_shard_degree,
                                   ps.tensor_parallel_degree, ps.pipeline_parallel_degree},
                                  world_->size());
  });
  // The model's experts are checked in check_model; the mesh part here, before the ep groups form.
  config::validate_expert_parallel_mesh(c_, degrees.dp_shard, degrees.tp);
  degrees.ep = ps.expert_parallel_degree;
  mesh_ = std::make_unique<parallel::DeviceMesh>(*world_, degrees);
  dp_ = degrees.dp();
  dp_rank_ = mesh_->dp_rank();
  config::validate(c_, dp_);
  accumulation_ = config::accumulation_steps(c_, dp_);
  B_ = c_.training.local_batch_size;
  T_ = c_.training.seq_len;
  val_B_ = c_.validation.local_batch_size > 0 ? c_.validation.local_batch_size : B_;
  val_T_ = c_.validation.seq_len > 0 ? c_.validation.seq_len : T_;
}

// "model 'debug'", or "the model of DIR/config.json" (an empty model.name).
static std::string model_label(const config::JobConfig& c) {
  return c.model.name.empty() ? "the model of " + c.model.hf_assets_path + "/config.json" : "model '" + c.model.name + "'";
}

// Everything about the model that can fail on bad input, before any long work: its config, the
// TP split, plugins and overrides (the config tree with its replaced nodes), and every module's
// shape constraint.
void Trainer::check_model() {
  resolved_ = resolve_model(c_);
  const int64_t tp = mesh_->degrees().tp;
  const bool sequence_parallel = tp > 1 && c_.parallelism.enable_sequence_parallel;
  // throws naming what does not divide
  as_config_error([&] { return resolved_.spec->parallel_plan.tp_local_config(resolved_.config, tp); });
  config::validate_expert_parallel_model(c_, resolved_.config.num_experts);
  if (sequence_parallel && (B_ * T_) % tp != 0) {
    config::config_fail("[parallel] sequence parallel splits a micro-batch's ", B_ * T_,
                        " tokens over tensor_parallel_degree = ", tp, ", which does not divide them. HINT: change "
                        "training.local_batch_size / seq_len, or --no-parallelism.enable_sequence_parallel");
  }
  if (sequence_parallel && c_.validation.enable && (val_B_ * val_T_) % tp != 0) {
    config::config_fail("[parallel] sequence parallel splits a validation batch's ", val_B_ * val_T_,
                        " tokens over tensor_parallel_degree = ", tp,
                        ", which does not divide them. HINT: change validation.local_batch_size / seq_len");
  }
  check_memory(0.0, /*states_only=*/true);  // before anything per layer: a config.json's 1e9 layers
  check_pipeline();
  const config::ActivationCheckpointSection& ac = c_.activation_checkpoint;
  recompute_ = nn::recompute_per_layer(ac.mode, ac.selective_ac_option, resolved_.config.num_layers);
  check_memory(0.0, false);
  const plugins::LoadedPlugins loaded = plugins::load_plugins(plugins::split_imports(c_.overrides.imports));
  TITAN_CHECK(tp == 1 || loaded.files.empty(), "[parallel] plugin overrides are not tensor-parallel yet. HINT: "
              "use them with data_parallel_shard_degree, or drop override.imports");
  std::vector<plugins::Override> overrides = loaded.overrides;  // opt-in: imported ones only
  tree_ = nn::decoder_config_tree(resolved_.config);
  if (c_.lora.rank > 0) {
    const plugins::Override lora = as_config_error([&] { return plugins::lora_override(lora_options(c_)); });
    // An adapter on nothing trains 0 parameters: a run that only looks like fine-tuning.
    if (plugins::matching_nodes(lora, tree_).empty()) {
      config::config_fail("[lora] lora.target_modules='", c_.lora.target_modules, "' matches no projection of ",
                          model_label(c_), " (layers 0..", resolved_.config.num_layers - 1,
                          "). HINT: PEFT names (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj), "
                          "all-linear, or a glob such as layers.*.attention.wq");
    }
    overrides.push_back(lora);
  }
  if (!overrides.empty()) plugins::apply_overrides(tree_, overrides);
  // The adapters' size is known once the tree has them (the rank times each targeted projection).
  if (c_.lora.rank > 0) check_memory(lora_adapter_elements(tree_), false);
}

// Before any weight exists: the least this rank needs against what it has (`adapter_elements`:
// LoRA's, trained; `states_only`: without the planner's activations, which walk every layer).
void Trainer::check_memory(double adapter_elements, bool states_only) const {
  MemoryFloorInput in;
  in.model = resolved_.config;
  in.world = world_->size();
  in.dp_shard = mesh_->degrees().dp_shard;
  in.tp = mesh_->degrees().tp;
  in.ep = mesh_->degrees().ep;
  in.pp = mesh_->degrees().pp;
  in.local_batch = std::max(B_, c_.validation.enable ? val_B_ : 0);
  in.seq_len = std::max(T_, c_.validation.enable ? val_T_ : 0);
  in.recompute = recompute_;
  in.bf16 = parse_precision(c_.training.mixed_precision_param) == Precision::bfloat16;
  in.frozen_base = c_.lora.rank > 0;
  in.adapter_elements = adapter_elements;
  FloorFields fields;
  if (c_.model.name.empty()) {  // the model of a config.json
    fields.layers = "num_hidden_layers in " + c_.model.hf_assets_path + "/config.json (or set model.n_layers)";
  }
  check_memory_floor(states_only ? memory_floor_states(in) : memory_floor(in), available_memory_per_rank(),
                     model_label(c_), fields);
}

// With pipeline_parallel_degree > 1: the stages of the model's layers and the schedule's order for
// this local batch, every impossible split or micro-batch count a one-line config error before step 1.
void Trainer::check_pipeline() {
  const config::ParallelismSection& ps = c_.parallelism;
  if (ps.pipeline_parallel_degree == 1) return;
  const nn::DecoderConfig& mc = resolved_.config;
  if (mc.tie_embeddings) {
    config::config_fail("parallelism.pipeline_parallel_degree=", ps.pipeline_parallel_degree, ": ", model_label(c_),
                        " ties its head to the embedding, which the first and last stages would share; pipeline "
                        "parallelism needs untied embeddings");
  }
  if (mc.load_balance == nn::LoadBalance::aux_loss) {
    config::config_fail("parallelism.pipeline_parallel_degree=", ps.pipeline_parallel_degree, " with model.load_balance="
                        "aux_loss: the aux loss couples every layer's router; use load_balance=bias or none");
  }
  pipeline_schedule_ = parallel::parse_pipeline_schedule(ps.pipeline_parallel_schedule);
  pipeline_layout_ = models::decoder_pipeline_layout(mc.num_layers, ps.pipeline_parallel_degree, pipeline_schedule_,
                                               ps.pipeline_parallel_layers_per_stage, ps.pipeline_parallel_split_points);
  (void)parallel::pipeline_schedule(pipeline_schedule_, pipeline_layout_, 0, B_ / ps.pipeline_parallel_microbatch_size);
  const int64_t tp = mesh_->degrees().tp, tokens = ps.pipeline_parallel_microbatch_size * T_;
  if (tp > 1 && ps.enable_sequence_parallel && tokens % tp != 0) {
    config::config_fail("parallelism.pipeline_parallel_microbatch_size=", ps.pipeline_parallel_microbatch_size,
                        ": sequence parallel splits a pipeline micro-batch's ", tokens, " tokens over "
                        "tensor_parallel_degree = ", tp, ", which does not divide them; change the micro-batch size "
                        "or training.seq_len");
  }
}

// The whole model, built from the tree by its family, every shape constraint checked (setup then
// initialises or HF-loads it: those of one rank, and parallelize keeps this rank's share).
std::unique_ptr<nn::Decoder> Trainer::build_model() {
  // LoRA: everything but the adapters is frozen, stored in the compute dtype (a bf16 base costs 2
  // bytes a weight and has no gradient or optimizer state).
  std::optional<nn::FrozenParameterScope> frozen;
  if (c_.lora.rank > 0) frozen.emplace(compute_dtype(parse_precision(c_.training.mixed_precision_param)));
  std::unique_ptr<nn::Decoder> whole = resolved_.spec->build(resolved_.config, tree_);
  whole->check_shapes(B_, T_);
  if (c_.validation.enable) whole->check_shapes(val_B_, val_T_);
  whole->set_recompute(recompute_);
  models::Parallelized::check(*whole, *mesh_);
  return whole;
}

// Tokenizer, dump folder (config.toml) and the loader. Every rank reads the global batch's stream
// and keeps its own rows (dp_rank): the batches of any mesh are those of one rank with
// local_batch_size x dp, so losses match across layouts and the cursor (the same on every rank)
// resumes on any of them.
void Trainer::setup_data() {
  tokenizer_ = std::make_unique<data::Tokenizer>(load_tokenizer(c_));
  const nn::DecoderConfig& mc = resolved_.config;
  const bool folder_model = std::filesystem::exists(std::filesystem::path(c_.model.hf_assets_path) / "config.json");
  TITAN_CHECK(tokenizer_->vocab_size() <= mc.vocab_size, "[train] the tokenizer in ", c_.model.hf_assets_path,
              " has ", tokenizer_->vocab_size(), " tokens but ", model_label(c_), " has vocab_size ", mc.vocab_size,
              ". HINT: ", !c_.model.name.empty() && folder_model
                  ? "to train the model of that folder (its config.json), pass --model.name= (empty); or "
                  : "",
              "train a tokenizer with --vocab-size <= ", mc.vocab_size, " or pick a larger model.name");
  const data::DocumentTokens doc_tokens = data::document_tokens_from_folder(c_.model.hf_assets_path, *tokenizer_);
  std::error_code ec;
  std::filesystem::create_directories(c_.job.dump_folder, ec);
  TITAN_CHECK(!ec && std::filesystem::is_directory(c_.job.dump_folder), "[train] cannot create job.dump_folder ",
              c_.job.dump_folder, ": ", ec ? ec.message() : "a file is in the way",
              ". HINT: set --job.dump_folder to a writable folder");
  if (world_->rank() == 0) {
    ckpt::write_text_file_atomic((std::filesystem::path(c_.job.dump_folder) / "config.toml").string(),
                                 str("# titan train --config ", config_name_, " (resolved)\n", config::to_toml(c_)));
  }
  loader_config_.dataset.path = dataset_path(c_);
  loader_config_.batch_size = B_ * dp_;
  loader_config_.seq_len = T_;
  loader_config_.eot_id = doc_tokens.eot_id;
  loader_config_.doc_prefix = doc_tokens.prefix;
  loader_config_.doc_suffix = doc_tokens.suffix;
  loader_config_.dataset.format = c_.training.dataset_format;
  loader_config_.dataset.text_field = c_.training.dataset_text_field;
  loader_config_.dataset.skip_bad_lines = c_.training.dataset_skip_bad_lines;
  if (c_.training.dataset_format == "chat") {  // the tokenizer folder's chat_template renders each line
    loader_config_.chat = std::make_shared<const data::ChatTemplate>(data::ChatTemplate::from_folder(c_.model.hf_assets_path));
    loader_config_.mask_non_assistant = c_.training.mask_non_assistant;
  }
  loader_ = std::make_unique<data::PrefetchLoader>(loader_config_, *tokenizer_);
}

// The validation set, read exactly as the training set (a copy of the training loader's config:
// tokenizer, bos/eot, packing and any dataset option it carries) with the validation path and
// batch; checked to hold one whole batch before step 1.
void Trainer::setup_validation() {
  if (!c_.validation.enable) return;
  const std::string& path = c_.validation.dataset_path;
  TITAN_CHECK(std::filesystem::exists(path), "[validation] validation.dataset_path ", path, " does not exist. HINT: "
              "set it to a held-out .txt/.jsonl(.zst) file or folder");
  data::LoaderConfig global = loader_config_;
  global.dataset.path = path;
  global.batch_size = val_B_ * dp_;
  global.seq_len = val_T_;
  validator_ = std::make_unique<Validator>(global, *tokenizer_, val_B_, dp_rank_, c_.validation.steps);
  validator_->check_set();
  const std::string amount = c_.validation.steps < 0 ? "the whole set" : str(c_.validation.steps, " batches");
  log_info(str("validation ", path, " every ", c_.validation.freq, " steps and after the last: ", amount,
               " in batches of ", val_B_ * dp_, " x ", val_T_, " tokens (local ", val_B_, ")"));
}

void Trainer::setup() {
  setup_mesh();
  if (world_->rank() == 0) {  // this run owns job.dump_folder before anything in it is read or written
    std::error_code ec;
    std::filesystem::create_directories(c_.job.dump_folder, ec);
    TITAN_CHECK(!ec && std::filesystem::is_directory(c_.job.dump_folder), "[train] cannot create job.dump_folder ",
                c_.job.dump_folder, ": ", ec ? ec.message() : "a file is in the way",
                ". HINT: set --job.dump_folder to a writable folder");
    run_lock_ = std::make_unique<RunLock>(c_.job.dump_folder, "job.dump_folder");
    // An absolute (or ../) checkpoint.folder can be named by runs with other dump folders.
    const std::string checkpoints = checkpoint_folder(c_);
    const bool writes_checkpoints = c_.checkpoint.enable || c_.checkpoint.last_save_in_hf;
    if (writes_checkpoints && !ckpt::folder_contains(c_.job.dump_folder, checkpoints)) {
      checkpoint_lock_ = std::make_unique<RunLock>(checkpoints, "checkpoint.folder");
    }
    check_output_folders(c_);
  }
  check_model();
  std::unique_ptr<nn::Decoder> whole = build_model();
  setup_data();
  setup_validation();
  const models::ModelSpec& spec = *resolved_.spec;
  const std::optional<ckpt::CheckpointEntry> resume = find_resume_checkpoint(c_, world_->rank() == 0);
  // A LoRA checkpoint holds the adapters only: its frozen base comes from the same place every start.
  const bool lora = c_.lora.rank > 0;
  const bool base_from_hf =
      (!resume || lora) && c_.checkpoint.initial_load_in_hf && !c_.checkpoint.initial_load_path.empty();
  const uint64_t seed = static_cast<uint64_t>(c_.training.seed);
  if (base_from_hf) {
    // Every base weight comes from the folder (a random init first would only cost time: minutes
    // for billions of weights); LoRA adapters start as PEFT's.
    for (nn::Parameter* p : whole->parameters()) {
      if (nn::is_lora_parameter(p->fqn)) nn::init_lora_parameter(*p, seed);
    }
    load_initial_hf(c_, spec, *whole);
  } else {
    spec.init_weights(*whole, seed);
  }
  trainable_params_ = 0;
  for (const nn::Parameter* p : nn::trainable(whole->parameters())) trainable_params_ += p->data().numel();
  model_ = std::make_unique<models::Parallelized>(
      std::move(whole), spec, *mesh_,
      models::ParallelizeOptions{c_.parallelism.enable_sequence_parallel, c_.parallelism.fsdp_prefetch,
                                   compute_dtype(parse_precision(c_.training.mixed_precision_param)),
                                   compute_dtype(parse_precision(c_.training.mixed_precision_reduce)),
                                   pipeline_layout_, pipeline_schedule_});
  optimizer_ = std::make_unique<AdamW>(model_->shards(), AdamWConfig{c_.optimizer.beta1, c_.optimizer.beta2,
                                                                     c_.optimizer.eps, c_.optimizer.weight_decay});
  schedule_ = std::make_unique<LrSchedule>(LrScheduleConfig{c_.training.steps, c_.lr_scheduler.warmup_steps,
                                                            c_.lr_scheduler.decay_ratio, c_.lr_scheduler.decay_type,
                                                            c_.lr_scheduler.min_lr_factor});
  flops_per_token_ = spec.flops_per_token(resolved_.config, T_);
  if (c_.lora.rank > 0) {
    // A frozen weight skips its gradient product (4 FLOPs per weight and token, not 6); the adapters
    // train in full (their recomputed down-projection not counted).
    flops_per_token_ += 6.0 * static_cast<double>(trainable_params_) -
                        2.0 * static_cast<double>(models::matmul_params(resolved_.config));
  }
  // MFU is against the peak of the precision the GEMMs run in.
  peak_ = device_peak_flops(c_.metrics.peak_tflops, parse_precision(c_.training.mixed_precision_param));
  memory_total_ = device_memory_bytes();
  log_setup();
  checkpointer_ = std::make_unique<Checkpointer>(c_, *model_, *optimizer_, *loader_);
  start_ = checkpointer_->load_at_start(resume);
  tokens_seen_ = start_.tokens_seen;
}

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
                 params_m, "M); the base is frozen in ", c_.training.mixed_precision_param));
  }
  if (model_->sharded()) {
    const double held = static_cast<double>(model_->shard_numel());
    const int64_t tp = model_->tp_degree();
    log_info(str("[parallel] ", world_->size(), " ranks over ", world_->backend(), ": ", mesh_->degrees().describe(),
                 tp > 1 ? (model_->sequence_parallel() ? " (sequence parallel)" : " (no sequence parallel)") : "",
                 " | FSDP: this rank holds ", held / 1e6, "M of ", params_m, "M parameters (",
                 16.0 * held / double(1 << 30), " GiB with gradients and AdamW moments), blocks gathered just in time"));
  }
  // What stays allocated for the whole run: parameters (or this rank's shards), gradients, AdamW
  // moments, buffers, and the loader's batches.
  log_info(str("[memory] after setup: ", static_cast<double>(host_allocator().stats().live_bytes) / double(1 << 30),
               " GiB allocated (parameters, gradients, optimizer state, buffers)"));
  if (parallel::Pipeline* pipeline = model_->pipeline()) {
    const int64_t micro = B_ / c_.parallelism.pipeline_parallel_microbatch_size;
    log_info(str("[pipeline] ", pipeline_layout_.num_stages(), " stages on ", pipeline_layout_.pp, " ranks, ",
                 parallel::pipeline_schedule_name(pipeline->kind()), ", ", micro, " micro-batches of ",
                 c_.parallelism.pipeline_parallel_microbatch_size, " rows per local batch (ideal bubble ",
                 100.0 * parallel::pipeline_bubble_fraction(pipeline_layout_, micro), "%): ",
                 pipeline_layout_.describe()));
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
  log_info(str("[precision] ", precision_line(parse_precision(c_.training.mixed_precision_param))));
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
  MetricsOptions mo{c_.job.dump_folder, c_.metrics.log_freq, c_.training.steps, c_.metrics.enable_jsonl,
                    c_.metrics.enable_tensorboard, c_.metrics.save_tb_folder, config_name_};
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
        metrics_->record_validation(validator_->run(*model_, step));
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
  if (world_->size() > 1) world_->all_reduce_max(&signal, 1);
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

nn::LossResult Trainer::forward_backward(const data::Batch& micro, int64_t step_targets) {
  // The aux loss (aux_loss balancing) per micro-batch, as HF computes it for one forward, averaged
  // over the micro-batches (and the ranks).
  const float aux_scale = 1.0f / static_cast<float>(accumulation_ * dp_);
  if (parallel::Pipeline* pipeline = model_->pipeline()) {
    return pipeline->run(micro.inputs_BT, micro.labels_BT, c_.parallelism.pipeline_parallel_microbatch_size,
                         1.0f / static_cast<float>(step_targets));
  }
  return model_->model().forward_backward(micro.inputs_BT, micro.labels_BT,
                                          1.0f / static_cast<float>(step_targets), aux_scale);
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
  model_->zero_grad();
  double loss_sum = 0.0, aux_sum = 0.0;
  for (const data::Batch& b : micro_) {
    const nn::LossResult r = forward_backward(b, targets);
    loss_sum += r.loss_sum;
    aux_sum += r.aux_loss;
  }
  for (data::Batch& b : micro_) b = data::Batch{};
  model_->finish_grads();
  loss_sum = model_->dp_sum(model_->pipeline_sum(loss_sum));  // the last stage's
  aux_sum = model_->dp_sum(aux_sum);
  const nn::DecoderConfig& mc = resolved_.config;
  StepMetrics m;
  m.step = step;
  m.aux_loss = aux_sum / static_cast<double>(accumulation_ * dp_);
  m.loss = loss_sum / static_cast<double>(targets) + mc.router_aux_loss_coef * m.aux_loss;
  const SquaresReducer global = [&](double x) { return model_->grad_squares(x); };
  m.grad_norm = clip_grad_norm(model_->shards(), c_.training.max_norm, model_->sharded() ? global : nullptr,
                               &model_->norm_params());
  check_finite(step, m.loss, m.grad_norm);
  m.lr = c_.optimizer.lr * schedule_->factor(step);
  optimizer_->step(m.lr);
  nn::Decoder& model = model_->model();
  const nn::ExpertLoad load = model_->expert_load();
  m.ep_rank_load = model_->ep_rank_loads();
  if (mc.load_balance == nn::LoadBalance::bias) {
    model.update_expert_bias();  // from this step's load; resets it
  } else {
    model.reset_expert_load();
  }
  m.tokens = B_ * T_ * accumulation_;
  m.seconds = seconds_since(t0);
  m.tps = static_cast<double>(m.tokens) / m.seconds /
          static_cast<double>(model_->tp_degree() * model_->pp_degree());  // per rank
  m.tflops = m.tps * flops_per_token_ / 1e12;
  m.mfu = checked_mfu(m.tflops * 1e12, peak_);  // <= 100: a beaten peak is re-measured or raised
  m.memory_bytes = static_cast<double>(host_allocator().stats().peak_bytes);
  m.memory_percent = 100.0 * m.memory_bytes / memory_total_;
  m.data_wait_seconds = loader_->seconds_waiting() - waited_before;
  m.moe = load.defined;
  m.expert_load_min = load.min;
  m.expert_load_max = load.max;
  const parallel::CommStats cs = model_->comm_stats();
  m.comm_seconds = cs.seconds;
  m.comm_bytes =
      static_cast<double>(cs.all_gather_bytes + cs.reduce_scatter_bytes + cs.all_reduce_bytes + cs.all_to_all_bytes +
                          cs.send_bytes);
  tokens_seen_ += m.tokens * dp_;
  return m;
}

plugins::LoraOptions lora_options(const config::JobConfig& config) {
  plugins::LoraOptions o;
  o.rank = config.lora.rank;
  o.alpha = config.lora.alpha;
  o.target_modules.clear();
  std::string rest = config.lora.target_modules;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string item = rest.substr(0, comma);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) o.target_modules.push_back(item);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
  }
  return o;
}

TrainSummary run_training(const config::JobConfig& config, const std::string& config_name) {
  Trainer trainer(config, config_name);
  trainer.setup();
  return trainer.train();
}

}  // namespace titan::train
