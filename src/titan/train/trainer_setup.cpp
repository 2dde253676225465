// Trainer::setup and the checks before it (trainer.h): the mesh, the model and its plugins and
// overrides, the memory floor, the pipeline, the data and validation sets, then the model built,
// initialised or loaded, parallelized, and the optimizer, schedule and checkpointer made.
#include <filesystem>

#include "titan/checkpoint/atomic_file.h"
#include "titan/checkpoint/output_folder.h"
#include "titan/config/config_error.h"
#include "titan/config/overrides.h"
#include "titan/config/validate.h"
#include "titan/core/allocator.h"
#include "titan/core/log.h"
#include "titan/data/builtin_datasets.h"
#include "titan/data/tokenizer/special_tokens.h"
#include "titan/models/decoder/flops.h"
#include "titan/nn/lora.h"
#include "titan/plugins/lora.h"
#include "titan/plugins/plugin_loader.h"
#include "titan/train/memory_check.h"
#include "titan/train/meta_plan.h"
#include "titan/train/rank_agreement.h"
#include "titan/train/support.h"
#include "titan/train/trainer.h"

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

// The job's ranks and their mesh first: every later check knows the data-parallel degree.
void Trainer::setup_mesh() {
  world_ = &parallel::world_comm();
  parallel::set_collective_timeout(static_cast<double>(c_.comm.timeout_seconds));
  check_ranks_agree(*world_, c_);
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
  config::validate_expert_parallel_mesh(c_, degrees.dp_shard);
  degrees.ep = ps.expert_parallel_degree;
  mesh_ = std::make_unique<parallel::DeviceMesh>(*world_, degrees);
  dp_ = mesh_->ways(parallel::BatchSplit::rows);  // the dimensions that split the batch's rows
  dp_rank_ = mesh_->way(parallel::BatchSplit::rows);
  config::validate(c_, dp_);
  check_supported(job_features(c_));
  precision_ = resolve_precision(c_);
  accumulation_ = config::accumulation_steps(c_, dp_);
  B_ = c_.training.local_batch_size;
  T_ = c_.training.seq_len;
  val_B_ = c_.validation.local_batch_size > 0 ? c_.validation.local_batch_size : B_;
  val_T_ = c_.validation.seq_len > 0 ? c_.validation.seq_len : T_;
}

// Everything about the model that can fail on bad input, before any long work: its config, the
// TP split, plugins and overrides (the config tree with its replaced nodes), and every module's
// shape constraint.
void Trainer::check_model() {
  resolved_ = as_config_error([&] { return resolve_model(c_); });  // a config.json's problems are the job's
  check_supported(job_features(c_, &resolved_.config));  // the model's facts (tied embeddings)
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
  check_memory(/*measured=*/false);  // before anything per layer: a config.json's 1e9 layers
  check_pipeline();
  const config::ActivationCheckpointSection& ac = c_.activation_checkpoint;
  recompute_ = nn::recompute_per_layer(ac.mode, ac.selective_ac_option, resolved_.config.num_layers);
  tree_ = job_tree(c_, resolved_);
  check_memory(/*measured=*/true);
}

// Before any weight exists: the least this rank needs against what it has. First the states alone
// (closed forms); then (`measured`, the tree final) this rank's step peak measured on the meta
// device, LoRA's adapters counted from the tree.
void Trainer::check_memory(bool measured) const {
  MemoryFloorInput in;
  in.model = resolved_.config;
  in.world = world_->size();
  in.dp_shard = mesh_->degrees().dp_shard;
  in.tp = mesh_->degrees().tp;
  in.ep = mesh_->degrees().ep;
  in.pp = mesh_->degrees().pp;
  in.bf16 = precision_.param == Precision::bfloat16;
  in.frozen_base = c_.lora.rank > 0;
  if (c_.lora.base_quantization == "nf4") in.quantized_bytes_per_weight = 0.5 + 4.0 / ops::kNf4Block;
  // int8's f32 absmax per output row costs 4 / in_features a weight, counted here at in_features =
  // dim: exact for q/k/v/gate/up, a little high for o and down (wider inputs); < 0.1% of the bytes.
  if (c_.lora.base_quantization == "int8") in.quantized_bytes_per_weight = 1.0 + 4.0 / resolved_.config.dim;
  // gguf: the file's blocks, at most q8_0's 34 bytes per 32 weights (q4_K: 144 per 256).
  if (c_.lora.base_quantization == "gguf") in.quantized_bytes_per_weight = 34.0 / 32.0;
  in.bf16_moments = c_.optimizer.state_dtype == "bfloat16";
  FloorFields fields;
  if (c_.model.name.empty()) {  // the model of a config.json
    fields.layers = "num_hidden_layers in " + c_.model.hf_assets_path + "/config.json (or set model.n_layers)";
  }
  if (!measured) {
    check_memory_floor(memory_floor_states(in), available_memory_per_rank(), model_label(c_), fields);
    return;
  }
  // The adapters' size is known once the tree has them (the rank times each targeted projection).
  if (c_.lora.rank > 0) in.adapter_elements = lora_adapter_elements(tree_);
  const double available = available_memory_per_rank();
  check_memory_floor(memory_floor_states(in), available, model_label(c_), fields);
  try {
    in.measured_peak = meta_plan(c_, resolved_, tree_, mesh_->degrees(), world_->rank()).peak;
  } catch (const MetaValuesError& e) {  // a module without a meta path (a plugin's): the states only
    log_warn(str("[memory] the floor counts parameter states only: the meta run stopped at ", e.what()));
    return;
  }
  check_memory_floor(memory_floor(in), available, model_label(c_), fields);
}

// With pipeline_parallel_degree > 1: the stages of the model's layers and the schedule's order for
// this local batch, every impossible split or micro-batch count a one-line config error before step 1.
void Trainer::check_pipeline() {
  const config::ParallelismSection& ps = c_.parallelism;
  if (ps.pipeline_parallel_degree == 1) return;
  const nn::DecoderConfig& mc = resolved_.config;
  pipeline_ = resolve_pipeline(ps, mc.num_layers, B_);
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
  std::unique_ptr<nn::Decoder> whole = build_job_model(c_, resolved_, tree_, recompute_, precision_.param);
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
  loader_config_.dataset.chat_messages_field = c_.training.chat_messages_field;
  loader_config_.dataset.chat_role_key = c_.training.chat_role_key;
  loader_config_.dataset.chat_content_key = c_.training.chat_content_key;
  loader_config_.dataset.chat_role_map = c_.training.chat_role_map;
  loader_config_.mask_non_assistant = c_.training.mask_non_assistant;
  // The tokenizer folder's chat_template renders chat rows: required for chat data, and for auto
  // data read when the folder has one (the loader refuses chat rows without it).
  if (c_.training.dataset_format == "chat") {
    loader_config_.chat = std::make_shared<const data::ChatTemplate>(data::ChatTemplate::from_folder(c_.model.hf_assets_path));
  } else if (c_.training.dataset_format == "auto" && !c_.model.hf_assets_path.empty()) {
    try {
      loader_config_.chat = std::make_shared<const data::ChatTemplate>(data::ChatTemplate::from_folder(c_.model.hf_assets_path));
    } catch (const Error&) {  // no template: fine unless the rows are chat
    }
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

// The folders among `paths` (and their missing parents) that do not exist yet: what this run creates.
static std::vector<std::filesystem::path> missing_folders(const std::vector<std::string>& paths) {
  std::vector<std::filesystem::path> out;
  for (const std::string& path : paths) {
    for (std::filesystem::path p = std::filesystem::absolute(path).lexically_normal();
         !p.empty() && p != p.parent_path() && !std::filesystem::exists(p); p = p.parent_path()) {
      out.push_back(p);  // deepest first
    }
  }
  return out;
}

// A failed setup leaves no folder it created behind: its files there (the run lock, config.toml)
// go, then each such folder if nothing else is in it (fs::remove removes empty folders only).
static void remove_created_folders(const std::vector<std::filesystem::path>& created) {
  std::error_code ec;
  for (const std::filesystem::path& folder : created) {
    for (const char* name : {".titan.lock", "config.toml"}) std::filesystem::remove(folder / name, ec);
    std::filesystem::remove(folder, ec);
  }
}

void Trainer::setup() {
  setup_mesh();
  const std::vector<std::filesystem::path> created =
      world_->rank() == 0 ? missing_folders({c_.job.dump_folder, checkpoint_folder(c_)})
                          : std::vector<std::filesystem::path>{};
  try {
    setup_run();
  } catch (...) {
    run_lock_.reset();
    checkpoint_lock_.reset();
    remove_created_folders(created);
    throw;
  }
}

void Trainer::setup_run() {
  if (world_->rank() == 0) {  // this run owns job.dump_folder before anything in it is read or written
    std::error_code ec;
    std::filesystem::create_directories(c_.job.dump_folder, ec);
    TITAN_CHECK(!ec && std::filesystem::is_directory(c_.job.dump_folder), "[train] cannot create job.dump_folder ",
                c_.job.dump_folder, ": ", ec ? ec.message() : "a file is in the way",
                ". HINT: set --job.dump_folder to a writable folder");
    run_lock_ = std::make_unique<RunLock>(c_.job.dump_folder, "job.dump_folder");
    check_checkpoint_folder_links(c_);
    // An absolute (or ../) checkpoint.folder can be named by runs with other dump folders.
    const std::string checkpoints = checkpoint_folder(c_);
    const bool writes_checkpoints = c_.checkpoint.enable || c_.checkpoint.last_save_in_hf || c_.checkpoint.last_save_in_gguf;
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
  model_ = std::make_unique<models::Parallelized>(std::move(whole), spec, *mesh_,
                                                  parallelize_options(c_, precision_, pipeline_, resolved_, recompute_));
  optimizer_ = make_optimizer(c_, *model_);
  schedule_ = std::make_unique<LrSchedule>(lr_schedule_config(c_));
  flops_per_token_ = spec.flops_per_token(resolved_.config, T_);
  if (c_.lora.rank > 0) {
    // A frozen weight skips its gradient product (4 FLOPs per weight and token, not 6); the adapters
    // train in full (their recomputed down-projection not counted).
    flops_per_token_ += 6.0 * static_cast<double>(trainable_params_) -
                        2.0 * static_cast<double>(models::matmul_params(resolved_.config));
  }
  // MFU is against the peak of the precision the GEMMs run in.
  peak_ = device_peak_flops(c_.metrics.peak_tflops, precision_.param);
  memory_total_ = device_memory_bytes();
  log_setup();
  checkpointer_ = std::make_unique<Checkpointer>(c_, *model_, *optimizer_, *loader_);
  start_ = checkpointer_->load_at_start(resume);
  tokens_seen_ = start_.tokens_seen;
  release_cached_host_blocks();  // loading's per-tensor staging: not resident through the run
}

}  // namespace titan::train
