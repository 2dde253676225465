#include "titan/train/checkpointer.h"

#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include "titan/checkpoint/output_folder.h"
#include "titan/config/config_error.h"
#include "titan/config/overrides.h"
#include "titan/config/validate.h"
#include "titan/config/value_text.h"
#include "titan/core/abbreviate.h"
#include "titan/core/clock.h"
#include "titan/core/log.h"
#include "titan/core/slices.h"
#include "titan/models/decoder/gguf_model.h"
#include "titan/models/decoder/peft.h"
#include "titan/train/muon.h"

namespace titan::train {
namespace {

namespace fs = std::filesystem;
constexpr const char* kOtherModel = ". HINT: the checkpoint is from another model; match model.name / model.n_layers";

// The checkpoint's tensors named `names`, in that order; `where` names the file in errors. Every
// name must be there with its shape, and nothing else (missing and unexpected names are listed).
std::vector<Tensor> match_tensors(const ckpt::NamedTensors& saved, const std::vector<std::string>& names,
                                  const std::vector<Shape>& shapes, const std::string& where) {
  std::map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : saved) by_name[name] = &t;
  std::vector<Tensor> out;
  std::string missing;
  for (size_t i = 0; i < names.size(); ++i) {
    const auto it = by_name.find(names[i]);
    if (it == by_name.end()) {
      missing += str(missing.empty() ? "" : ", ", names[i]);
      continue;
    }
    TITAN_CHECK(it->second->shape() == shapes[i], "[train] ", where, ": ", names[i], " is ", it->second->describe(),
                ", the model expects ", shape_str(shapes[i]), kOtherModel);
    out.push_back(*it->second);
    by_name.erase(it);
  }
  std::string unexpected;
  for (const auto& [name, t] : by_name) unexpected += str(unexpected.empty() ? "" : ", ", name);
  TITAN_CHECK(missing.empty() && unexpected.empty(), "[train] ", where, " does not match the model: missing [",
              missing, "], unexpected [", unexpected, "]", kOtherModel);
  return out;
}

// A pipeline stage's ranks restore their stage's tensors only: the others' are set aside before
// match_tensors (which still lists what this stage misses).
ckpt::NamedTensors only_named(const ckpt::NamedTensors& saved, const std::vector<std::string>& names) {
  const std::set<std::string> wanted(names.begin(), names.end());
  ckpt::NamedTensors out;
  for (const auto& [name, t] : saved) {
    if (wanted.count(name)) out.emplace_back(name, t);
  }
  return out;
}

// This rank's piece of a saved whole tensor, shaped like `like`: the tensor-parallel slice (if
// any), then flat elements [start, start + numel of `like`) of it.
Tensor piece_of(const Tensor& whole, const ckpt::TensorPiece& piece, const Tensor& like) {
  Tensor slice = whole;
  if (piece.tp_dim >= 0) {
    slice = take_along(whole, piece.tp_dim,
                       slice_indices(whole.size(piece.tp_dim), piece.tp_sections, piece.tp_rank, piece.tp_degree));
  }
  if (piece.start == 0 && slice.shape() == like.shape()) return slice;
  return slice.contiguous().reshape({slice.numel()}).narrow(0, piece.start, like.numel()).reshape(like.shape());
}

ckpt::SaveGroup save_group(parallel::Comm& comm) {
  return {comm.rank(), comm.size(), [&comm](const std::string& s) { return comm.all_gather_strings(s); },
          [&comm](const std::string& s) { return comm.broadcast_string(s, 0); }};
}

}  // namespace

void restore_model(const ckpt::TrainState& s, const nn::ParameterList& params, const std::string& dir) {
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const nn::Parameter* p : params) {
    names.push_back(p->fqn);
    shapes.push_back(p->value.shape());
  }
  const std::vector<Tensor> values = match_tensors(s.model, names, shapes, dir + "/model.safetensors");
  for (size_t i = 0; i < params.size(); ++i) params[i]->value.copy_from(values[i]);
}

// Host copies of the state for async saves, allocated at the first save and reused after it: a
// fresh 7 GB allocation per save costs its page faults (0.8 GB/s measured, bench/checkpoint_bench)
// where copying into touched memory runs at memcpy speed. The price is one more copy of weights and
// moments held for the whole run (torchtitan's async_with_pinned_mem makes the same trade).
struct Checkpointer::Staging {
  std::vector<Tensor> tensors;  // in capture order
  size_t next = 0;
  Tensor copy_of(const Tensor& live) {
    if (next == tensors.size()) tensors.push_back(Tensor::empty(live.shape(), live.dtype()));
    Tensor& t = tensors[next++];
    if (t.shape() != live.shape() || t.dtype() != live.dtype()) t = Tensor::empty(live.shape(), live.dtype());
    t.copy_from(live);
    return t;
  }
};

Checkpointer::Checkpointer(const config::JobConfig& config, models::Parallelized& model, Optimizer& optimizer,
                           data::PrefetchLoader& loader)
    : config_(config), model_(model), optimizer_(optimizer), loader_(loader),
      writer_(config.checkpoint.async_mode == "async" && !model.sharded()), staging_(std::make_unique<Staging>()) {
  if (config.checkpoint.enable && config.checkpoint.async_mode == "async" && model.sharded()) {
    log_info("[checkpoint] multi-rank runs save synchronously (every rank writes its shard); async_mode ignored");
  }
  for (size_t i = 0; i < model.shards().size(); ++i) targets_.push_back({model.shards()[i], model.placements()[i]});
  for (const auto& [name, shape] : model.global_parameters()) {
    full_names_.push_back(name);
    full_shapes_.push_back(shape);
  }
}

Checkpointer::~Checkpointer() = default;

// The state after `step`: this rank's parameters (whole, or its pieces) and their optimizer state,
// the buffers, the data cursor, step and config. Of a multi-rank run only the first replica
// writes pieces, a TP-replicated parameter only from tp rank 0 and an expert weight only from the
// first ep group (the others hold copies);
// buffers come from world rank 0. `staged`: every tensor copied into the staging buffers (an async
// save writes while training changes the live ones); else views of the live tensors (a
// synchronous save is done before they change).
ckpt::TrainState Checkpointer::capture(int64_t step, int64_t tokens_seen, bool model_only, bool staged) {
  staging_->next = 0;
  const auto take = [&](const Tensor& live) { return staged ? staging_->copy_of(live) : live; };
  ckpt::TrainState s;
  s.step = step;
  s.tokens_seen = tokens_seen;
  s.seed = static_cast<uint64_t>(config_.training.seed);
  s.optimizer_step = optimizer_.step_count();
  s.loader_state_json = loader_.state().to_json();
  s.config_toml = config::to_toml(config_);
  const bool pieces = model_.sharded();  // a world of one writes whole tensors, no piece list
  const bool first_replica = model_.mesh().dp_replicate().rank() == 0;
  for (size_t i = 0; i < targets_.size() && first_replica; ++i) {
    const RestoreTarget& t = targets_[i];
    if (model_.is_copy(i)) continue;  // replicated across tp, or another ep group's experts: one rank writes it
    s.model.emplace_back(t.param->fqn, take(t.param->value));
    if (pieces) s.model_pieces.push_back(t.piece);
    if (model_only) continue;
    const std::vector<std::string> states = optimizer_.state_names(t.param->fqn);
    for (size_t k = 0; k < states.size(); ++k) {
      s.optimizer.emplace_back(t.param->fqn + "." + states[k], take(optimizer_.state(i, k)));
      if (pieces) s.optimizer_pieces.push_back(t.piece);
    }
  }
  // Every stage's first data-parallel rank (world rank 0 without a pipeline).
  if (model_.mesh().dp().rank() == 0 && model_.tp_rank() == 0) {
    for (const nn::Parameter* b : model_.model().buffers()) {  // whole tensors beside pieces
      s.model.emplace_back(b->fqn, take(b->value));
      if (pieces) s.model_pieces.push_back({b->value.shape(), 0});
    }
  }
  return s;
}

void Checkpointer::restore_weights(const ckpt::TrainState& s, const std::string& dir) {
  std::vector<std::string> names = full_names_;
  std::vector<Shape> shapes = full_shapes_;
  const nn::ParameterList buffers = model_.model().buffers();
  for (const nn::Parameter* b : buffers) {
    names.push_back(b->fqn);
    shapes.push_back(b->value.shape());
  }
  const std::vector<Tensor> values = match_tensors(model_.pipeline() ? only_named(s.model, names) : s.model, names,
                                                   shapes, dir + "/model.safetensors");
  std::map<std::string, const Tensor*> by_name;
  for (size_t i = 0; i < names.size(); ++i) by_name[names[i]] = &values[i];
  for (const RestoreTarget& t : targets_) {
    t.param->value.copy_from(piece_of(*by_name.at(t.param->fqn), t.piece, t.param->value));
  }
  for (nn::Parameter* b : buffers) b->value.copy_from(*by_name.at(b->fqn));
}

// Optimizer state and the data cursor.
void Checkpointer::restore_training(const ckpt::TrainState& s, const std::string& dir) {
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < full_names_.size(); ++i) {
    for (const std::string& state : optimizer_.state_names(full_names_[i])) {
      names.push_back(full_names_[i] + "." + state);
      shapes.push_back(full_shapes_[i]);
    }
  }
  check_optimizer_kind(s.optimizer, config::uses_muon(config_.optimizer), dir + "/optimizer.safetensors");
  const std::vector<Tensor> saved = match_tensors(model_.pipeline() ? only_named(s.optimizer, names) : s.optimizer,
                                                  names, shapes, dir + "/optimizer.safetensors");
  std::map<std::string, const Tensor*> by_name;
  for (size_t i = 0; i < names.size(); ++i) by_name[names[i]] = &saved[i];
  std::vector<std::vector<Tensor>> states;
  for (const RestoreTarget& t : targets_) {
    states.emplace_back();
    for (const std::string& state : optimizer_.state_names(t.param->fqn)) {
      states.back().push_back(piece_of(*by_name.at(t.param->fqn + "." + state), t.piece, t.param->value));
    }
  }
  optimizer_.restore(s.optimizer_step, states);
  TITAN_CHECK(!s.loader_state_json.empty(), "[train] ", dir, "/state.json has no loader state; cannot resume the "
              "data stream. HINT: load it model-only (checkpoint.initial_load_model_only)");
  loader_.restore(data::LoaderState::from_json(s.loader_state_json));
}

// A native checkpoint given by checkpoint.initial_load_path: a step-<N> folder, or a checkpoint
// folder (its newest valid step).
ResumePoint Checkpointer::load_initial_native() {
  const config::JobConfig& c = config_;
  std::string dir = c.checkpoint.initial_load_path;
  if (!fs::exists(fs::path(dir) / "manifest.json")) {
    const std::optional<ckpt::CheckpointEntry> e =
        ckpt::find_checkpoint(dir, -1, !c.checkpoint.initial_load_model_only);
    TITAN_CHECK(e.has_value(), "[train] checkpoint.initial_load_path=", dir, " is neither a checkpoint step folder "
                "(no manifest.json) nor a folder of step-<N> folders. HINT: point it at <checkpoint folder>/step-<N>, "
                "or set checkpoint.initial_load_in_hf for a Hugging Face folder");
    dir = e->path;
  }
  const bool model_only = c.checkpoint.initial_load_model_only;
  const ckpt::TrainState s = ckpt::load_train_state(dir, model_only);
  restore_weights(s, dir);
  if (model_only) {
    log_info(str("initial load (model only) from ", dir, " (saved at step ", s.step, ")"));
    return {};
  }
  TITAN_CHECK(!s.model_only(), "[train] checkpoint.initial_load_path=", dir, " is model-only, but "
              "checkpoint.initial_load_model_only is false. HINT: set --checkpoint.initial_load_model_only");
  restore_training(s, dir);
  log_info(str("initial load from ", dir, " (step ", s.step, "): model, optimizer and data cursor"));
  return {s.step, s.tokens_seen, false};
}

// LoRA adapters are trained for the scale alpha / rank they were saved with and for the base they
// were trained over: resumed under another lora.alpha, the same A and B would add a differently
// scaled update from the first step on; over another lora.base_quantization (none, nf4, int8) they
// would correct a base whose weights differ from the one they learned on (QLoRA's adapters absorb
// its quantization error). The rank must match for the tensors to load at all. Config mistakes,
// refused before any step.
void Checkpointer::check_same_lora_scale(const ckpt::TrainState& s, const std::string& path) const {
  const config::JobConfig& c = config_;
  if (c.lora.rank == 0 || s.config_toml.empty()) return;
  config::JobConfig saved;
  config::apply_toml_text(saved, s.config_toml, path + "/config.toml");
  if (saved.lora.rank == 0) return;
  if (saved.lora.base_quantization != c.lora.base_quantization) {
    config::config_fail("[checkpoint] ", path, " trained its adapters over a base stored as lora.base_quantization ",
                        saved.lora.base_quantization, ", this run has ", c.lora.base_quantization,
                        ": the adapters would continue on other base weights. HINT: resume with "
                        "--lora.base_quantization ", saved.lora.base_quantization,
                        ", or start a new run in another job.dump_folder");
  }
  if (saved.lora.alpha == c.lora.alpha) return;
  config::config_fail("[checkpoint] ", path, " was trained with lora.alpha ", config::format_double(saved.lora.alpha),
                      " (adapter scale alpha / rank = ", config::format_double(saved.lora.alpha / saved.lora.rank),
                      "), this run has lora.alpha ", config::format_double(c.lora.alpha),
                      ": resuming would rescale the trained adapters. HINT: resume with --lora.alpha ",
                      config::format_double(saved.lora.alpha), ", or start a new run in another job.dump_folder");
}

ResumePoint Checkpointer::load_at_start(const std::optional<ckpt::CheckpointEntry>& resume) {
  const config::JobConfig& c = config_;
  if (resume) {
    const ckpt::TrainState s = ckpt::load_train_state(resume->path);
    check_same_lora_scale(s, resume->path);
    restore_weights(s, resume->path);
    if (!s.model_only()) restore_training(s, resume->path);
    if (s.seed != static_cast<uint64_t>(c.training.seed)) {
      log_warn(str("[checkpoint] ", resume->path, " was saved by a run with training.seed ", s.seed, ", this run has ",
                   c.training.seed, " (the weights come from the checkpoint)"));
    }
    log_info(str("resuming from ", resume->path, " (step ", s.step, ", ", s.tokens_seen, " tokens seen)"));
    return {s.step, s.tokens_seen, true};
  }
  if (c.checkpoint.initial_load_path.empty() || c.checkpoint.initial_load_in_hf) return {};
  return load_initial_native();
}

void Checkpointer::prepare(const ResumePoint& start) {
  if (!config_.checkpoint.enable || !writer_.async()) return;
  const auto t0 = Clock::now();
  capture(start.step, start.tokens_seen, false, true);
  log_info(str("[checkpoint] async staging buffers ready in ", seconds_since(t0), " s"));
}

bool Checkpointer::due(int64_t step) const {
  return config_.checkpoint.enable && (step % config_.checkpoint.interval == 0 || step == config_.training.steps);
}

// One save at the end of `step`; logs how long the training thread was held up. Async: the
// previous write still reads the staging buffers, so it is waited for first (a stall only when
// saves come faster than the disk writes them).
void Checkpointer::save(int64_t step, int64_t tokens_seen) {
  const auto t0 = Clock::now();
  const config::JobConfig& c = config_;
  const bool model_only = step == c.training.steps && c.checkpoint.last_save_model_only;
  const std::string folder = checkpoint_folder(c);
  parallel::Comm& world = model_.mesh().world();
  if (world.size() == 1) {
    if (writer_.async()) writer_.wait();
    writer_.save(folder, capture(step, tokens_seen, model_only, writer_.async()), c.checkpoint.keep_latest_k);
  } else {
    ckpt::save_train_state_sharded(folder, capture(step, tokens_seen, model_only, false), save_group(world),
                                   model_only, c.checkpoint.keep_latest_k);
  }
  const std::string how = world.size() > 1 ? str(" saved by ", world.size(), " ranks")
                          : writer_.async() ? std::string(" handed to the background writer")
                                            : std::string(" saved");
  log_info(str("checkpoint ", ckpt::step_dir_name(step), model_only ? " (model only)" : "", how, " in ", folder,
               "; training stalled ", seconds_since(t0), " s"));
}

void Checkpointer::finish() {
  if (!config_.checkpoint.enable) return;
  const auto t0 = Clock::now();
  writer_.wait();  // the last async save; re-throws its error
  if (writer_.async()) log_info(str("waited ", seconds_since(t0), " s for the last checkpoint write"));
}

// The trained model as an HF folder <checkpoint folder>/hf, with the run's tokenizer files, in
// checkpoint.export_dtype, sharded at checkpoint.max_shard_size. The architecture is the imported
// folder's (a Mistral import goes back out as Mistral).
void Checkpointer::export_hf() {
  const config::JobConfig& c = config_;
  const models::ModelSpec& spec = model_.spec();
  model_.with_full_model([&](const nn::Decoder& whole) {
    const auto t0 = Clock::now();
    models::HfExportOptions o;
    o.dtype = c.checkpoint.export_dtype;
    o.max_shard_bytes = config::parse_byte_size(c.checkpoint.max_shard_size);
    o.tokenizer_dir = c.model.hf_assets_path;
    if (c.checkpoint.initial_load_in_hf) {
      o.source_dir = c.checkpoint.initial_load_path;
    } else if (!c.model.hf_assets_path.empty()) {
      o.source_dir = c.model.hf_assets_path;
    }
    if (!o.source_dir.empty()) o.architecture = spec.hf.architecture_of(o.source_dir);
    o.overwrite = c.checkpoint.last_save_in_hf_overwrite;
    o.overwrite_flag = "--checkpoint.last_save_in_hf_overwrite";
    const std::string out = hf_export_folder(c).path;
    spec.hf.save_folder(whole, out, o);
    log_info(str("exported the model as a Hugging Face folder ", out, " (", o.dtype, ") in ", seconds_since(t0), " s"));
  });
}

// The trained model as one GGUF file <checkpoint folder>/model.gguf (models/decoder/gguf_model.h),
// in checkpoint.gguf_dtype, with the run's tokenizer; the architecture as export_hf picks it.
void Checkpointer::export_gguf() {
  const config::JobConfig& c = config_;
  const models::ModelSpec& spec = model_.spec();
  model_.with_full_model([&](const nn::Decoder& whole) {
    const auto t0 = Clock::now();
    models::GgufExportOptions o;
    o.dtype = c.checkpoint.gguf_dtype;
    o.replace_gguf = true;  // the run's own file in its checkpoint folder (an earlier run's export)
    o.tokenizer_dir = c.model.hf_assets_path;
    const std::string source = c.checkpoint.initial_load_in_hf ? c.checkpoint.initial_load_path : c.model.hf_assets_path;
    if (!source.empty() && std::filesystem::exists(std::filesystem::path(source) / "config.json")) {
      o.architecture = spec.hf.architecture_of(source);
      o.source_dir = source;
    }
    const std::string out = gguf_export_file(c);
    models::save_gguf(whole, out, o);
    log_info(str("exported the model as GGUF ", out, " (", o.dtype, ") in ", seconds_since(t0), " s"));
  });
}

void Checkpointer::export_adapter() {
  const config::JobConfig& c = config_;
  const std::string base = c.checkpoint.initial_load_in_hf ? c.checkpoint.initial_load_path : c.model.hf_assets_path;
  model_.with_full_model([&](const nn::Decoder& whole) {
    // parameters() hands out pointers only; nothing writes through them.
    models::save_peft_adapter(const_cast<nn::Decoder&>(whole), adapter_output(c), c.lora.rank, c.lora.alpha, base);
  });
}

}  // namespace titan::train
