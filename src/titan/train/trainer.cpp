#include "titan/train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include "titan/checkpoint/atomic_file.h"
#include "titan/checkpoint/train_state.h"
#include "titan/config/overrides.h"
#include "titan/config/validate.h"
#include "titan/core/allocator.h"
#include "titan/core/log.h"
#include "titan/data/builtin_datasets.h"
#include "titan/data/prefetch_loader.h"
#include "titan/data/tokenizer/special_tokens.h"
#include "titan/models/qwen3/hf_checkpoint.h"
#include "titan/models/qwen3/model.h"
#include "titan/models/qwen3/specs.h"
#include "titan/ops/softmax_xent/softmax_xent.h"
#include "titan/parallel/fsdp.h"
#include "titan/parallel/mesh.h"
#include "titan/parallel/tensor_parallel.h"
#include "titan/models/qwen3/parallel_plan.h"
#include "titan/plugins/plugin_loader.h"
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

// ---- native checkpoints (checkpoint.*; format: checkpoint/train_state.md) --------------------

namespace fs = std::filesystem;

// checkpoint.folder, relative to job.dump_folder unless absolute.
std::string checkpoint_folder(const config::JobConfig& c) {
  const fs::path f(c.checkpoint.folder);
  return f.is_absolute() ? f.string() : (fs::path(c.job.dump_folder) / f).string();
}

// Host copies of the state for async saves, allocated at the first save and reused after it: a
// fresh 7 GB allocation per save costs its page faults (0.8 GB/s measured, bench/checkpoint_bench)
// where copying into touched memory runs at memcpy speed. The price is one more copy of weights and
// moments held for the whole run (torchtitan's async_with_pinned_mem makes the same trade).
struct StagingBuffers {
  std::vector<Tensor> tensors;  // in capture order
  size_t next = 0;
  Tensor copy_of(const Tensor& live) {
    if (next == tensors.size()) tensors.push_back(Tensor::empty(live.shape(), live.dtype()));
    Tensor& t = tensors[next++];
    if (t.shape() != live.shape()) t = Tensor::empty(live.shape(), live.dtype());
    t.copy_from(live);
    return t;
  }
};

// What a checkpoint holds besides tensors: step, tokens seen, seed, AdamW's step, the data cursor, the config.
ckpt::TrainState state_scalars(const config::JobConfig& c, int64_t step, int64_t tokens_seen, const AdamW& optimizer,
                               const data::PrefetchLoader& loader) {
  ckpt::TrainState s;
  s.step = step;
  s.tokens_seen = tokens_seen;
  s.seed = static_cast<uint64_t>(c.training.seed);
  s.optimizer_step = optimizer.step_count();
  s.loader_state_json = loader.state().to_json();
  s.config_toml = config::to_toml(c);
  return s;
}

// The state after `step`: model_state (Decoder::state(): parameters and buffers) under their FQNs,
// the AdamW moments, the data cursor. With `staging` every tensor is copied into it (an async save writes while
// training changes the live ones); without, views of the live tensors (a synchronous save is done
// before they change).
ckpt::TrainState capture_train_state(const config::JobConfig& c, int64_t step, int64_t tokens_seen,
                                     const nn::ParameterList& model_state, const AdamW& optimizer,
                                     const data::PrefetchLoader& loader, bool model_only, StagingBuffers* staging) {
  if (staging != nullptr) staging->next = 0;
  const auto take = [&](const Tensor& live) { return staging != nullptr ? staging->copy_of(live) : live; };
  ckpt::TrainState s = state_scalars(c, step, tokens_seen, optimizer, loader);
  for (const nn::Parameter* p : model_state) s.model.emplace_back(p->fqn, take(p->value));
  if (model_only) return s;
  const nn::ParameterList& params = optimizer.params();
  for (size_t i = 0; i < params.size(); ++i) {
    s.optimizer.emplace_back(params[i]->fqn + ".exp_avg", take(optimizer.exp_avg(i)));
    s.optimizer.emplace_back(params[i]->fqn + ".exp_avg_sq", take(optimizer.exp_avg_sq(i)));
  }
  return s;
}

// This rank's share of the state of a multi-rank run (save_train_state_sharded): its parameter
// pieces and their moments (only the first replica writes them, and tensor-parallel replicated
// ones only tp rank 0: the others hold copies), plus the buffers from rank 0; step, tokens,
// cursor and config are the same on every rank.
ckpt::TrainState capture_sharded_state(const config::JobConfig& c, int64_t step, int64_t tokens_seen,
                                       const nn::ParameterList& shards, const std::vector<ckpt::TensorPiece>& layout,
                                       const nn::ParameterList& buffers, const AdamW& optimizer,
                                       const data::PrefetchLoader& loader, bool model_only, bool first_replica,
                                       int64_t tp_rank, bool write_buffers) {
  ckpt::TrainState s = state_scalars(c, step, tokens_seen, optimizer, loader);
  for (size_t i = 0; i < shards.size() && first_replica; ++i) {
    if (layout[i].tp_dim < 0 && tp_rank != 0) continue;  // replicated across tp: rank 0's copy
    s.model.emplace_back(shards[i]->fqn, shards[i]->value);
    s.model_pieces.push_back(layout[i]);
    if (model_only) continue;
    for (const auto& [suffix, t] : {std::pair<const char*, const Tensor*>{".exp_avg", &optimizer.exp_avg(i)},
                                    {".exp_avg_sq", &optimizer.exp_avg_sq(i)}}) {
      s.optimizer.emplace_back(shards[i]->fqn + suffix, *t);
      s.optimizer_pieces.push_back(layout[i]);
    }
  }
  if (write_buffers) {
    // Whole tensors beside pieces: a buffer is one piece covering all of it.
    for (const nn::Parameter* b : buffers) {
      s.model.emplace_back(b->fqn, b->value);
      s.model_pieces.push_back({b->value.shape(), 0});
    }
  }
  return s;
}

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
                ", the model expects ", shape_str(shapes[i]),
                ". HINT: the checkpoint is from another model; match model.name / model.n_layers");
    out.push_back(*it->second);
    by_name.erase(it);
  }
  std::string unexpected;
  for (const auto& [name, t] : by_name) unexpected += str(unexpected.empty() ? "" : ", ", name);
  TITAN_CHECK(missing.empty() && unexpected.empty(), "[train] ", where, " does not match the model: missing [",
              missing, "], unexpected [", unexpected,
              "]. HINT: the checkpoint is from another model; match model.name / model.n_layers");
  return out;
}


// This rank's piece of a saved whole tensor, shaped like `like`: the tensor-parallel slice (if
// any), then flat elements [start, start + numel of `like`) of it.
Tensor piece_of(const Tensor& whole, const ckpt::TensorPiece& piece, const Tensor& like) {
  Tensor slice = whole;
  if (piece.tp_dim >= 0) {
    const int64_t local = whole.size(piece.tp_dim) / piece.tp_degree;
    slice = whole.narrow(piece.tp_dim, piece.tp_rank * local, local).contiguous();
  }
  if (piece.start == 0 && slice.shape() == like.shape()) return slice;
  return slice.contiguous().reshape({slice.numel()}).narrow(0, piece.start, like.numel()).reshape(like.shape());
}

// Where a tensor-parallel-local tensor (or a flat piece of one, at `start`) sits in its parameter.
ckpt::TensorPiece placement(const std::string& fqn, const Shape& local, int64_t start, int64_t tp, int64_t tp_rank) {
  ckpt::TensorPiece p{local, start};
  if (tp > 1) {
    const int dim = qwen3::tp_split_dim(fqn);
    if (dim >= 0) {
      p.tp_dim = dim;
      p.tp_rank = tp_rank;
      p.tp_degree = tp;
      p.shape[static_cast<size_t>(dim)] *= tp;
    }
  }
  return p;
}

// What this rank restores: its tensors (whole parameters, or FSDP pieces) and the full set of
// model parameters every checkpoint must hold (names and shapes, all ranks' pieces together).
struct RestoreTargets {
  nn::ParameterList params;             // the optimizer's parameters (whole, or FSDP pieces)
  std::vector<ckpt::TensorPiece> layout;  // where each one sits in its full parameter
  std::vector<std::string> full_names;  // every model parameter
  std::vector<Shape> full_shapes;
  nn::ParameterList buffers;           // replicated, whole on every rank
};

void restore_model_targets(const ckpt::TrainState& s, const RestoreTargets& t, const std::string& dir) {
  std::vector<std::string> names = t.full_names;
  std::vector<Shape> shapes = t.full_shapes;
  for (const nn::Parameter* b : t.buffers) {
    names.push_back(b->fqn);
    shapes.push_back(b->value.shape());
  }
  const std::vector<Tensor> values = match_tensors(s.model, names, shapes, dir + "/model.safetensors");
  std::map<std::string, const Tensor*> by_name;
  for (size_t i = 0; i < names.size(); ++i) by_name[names[i]] = &values[i];
  for (size_t i = 0; i < t.params.size(); ++i) {
    t.params[i]->value.copy_from(piece_of(*by_name.at(t.params[i]->fqn), t.layout[i], t.params[i]->value));
  }
  for (nn::Parameter* b : t.buffers) b->value.copy_from(*by_name.at(b->fqn));
}

// Optimizer moments, the data cursor (and, by returning them, step and tokens seen).
void restore_training(const ckpt::TrainState& s, const RestoreTargets& t, AdamW& optimizer,
                      data::PrefetchLoader& loader, const std::string& dir) {
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (size_t i = 0; i < t.full_names.size(); ++i) {
    for (const char* suffix : {".exp_avg", ".exp_avg_sq"}) {
      names.push_back(t.full_names[i] + suffix);
      shapes.push_back(t.full_shapes[i]);
    }
  }
  const std::vector<Tensor> moments = match_tensors(s.optimizer, names, shapes, dir + "/optimizer.safetensors");
  std::map<std::string, const Tensor*> by_name;
  for (size_t i = 0; i < names.size(); ++i) by_name[names[i]] = &moments[i];
  std::vector<Tensor> m, v;
  for (size_t i = 0; i < t.params.size(); ++i) {
    const nn::Parameter* p = t.params[i];
    m.push_back(piece_of(*by_name.at(p->fqn + ".exp_avg"), t.layout[i], p->value));
    v.push_back(piece_of(*by_name.at(p->fqn + ".exp_avg_sq"), t.layout[i], p->value));
  }
  optimizer.restore(s.optimizer_step, m, v);
  TITAN_CHECK(!s.loader_state_json.empty(), "[train] ", dir, "/state.json has no loader state; cannot resume the "
              "data stream. HINT: load it model-only (checkpoint.initial_load_model_only)");
  loader.restore(data::LoaderState::from_json(s.loader_state_json));
}

struct ResumePoint {
  int64_t step = 0;         // steps already done; the loop starts at step + 1
  int64_t tokens_seen = 0;
  bool resumed = false;     // continued this run's own checkpoint (metrics.jsonl is appended)
};

// checkpoint.initial_load_in_hf: an HF folder's weights into the model (every shape checked,
// missing and unexpected keys listed). Weights only: the run starts at step 1.
void load_initial_hf(const config::JobConfig& c, nn::Decoder& model) {
  const auto t0 = Clock::now();
  qwen3::load_initial_hf(model, c.checkpoint.initial_load_path);
  log_info(str("initial load from the HF folder ", c.checkpoint.initial_load_path, " (weights) in ",
               seconds_since(t0), " s"));
}

// checkpoint.last_save_in_hf: the trained model as an HF folder <checkpoint folder>/hf, with the
// run's tokenizer files, in checkpoint.export_dtype, sharded at checkpoint.max_shard_size. The
// architecture is the imported folder's (a Mistral import goes back out as Mistral).
void export_hf(const config::JobConfig& c, const nn::Decoder& model) {
  const auto t0 = Clock::now();
  qwen3::HfExportOptions o;
  o.dtype = c.checkpoint.export_dtype;
  o.max_shard_bytes = config::parse_byte_size(c.checkpoint.max_shard_size);
  o.tokenizer_dir = c.model.hf_assets_path;
  if (c.checkpoint.initial_load_in_hf) {
    o.architecture = qwen3::hf_architecture(c.checkpoint.initial_load_path);
  } else if (!c.model.hf_assets_path.empty()) {
    o.architecture = qwen3::hf_architecture(c.model.hf_assets_path);
  }
  const std::string out = (fs::path(checkpoint_folder(c)) / "hf").string();
  qwen3::save_hf_folder(model, out, o);
  log_info(str("exported the model as a Hugging Face folder ", out, " (", o.dtype, ") in ", seconds_since(t0), " s"));
}

// A native checkpoint given by checkpoint.initial_load_path: a step-<N> folder, or a checkpoint
// folder (its newest valid step).
ResumePoint load_initial_native(const config::JobConfig& c, const RestoreTargets& targets, AdamW& optimizer,
                                data::PrefetchLoader& loader) {
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
  restore_model_targets(s, targets, dir);
  if (model_only) {
    log_info(str("initial load (model only) from ", dir, " (saved at step ", s.step, ")"));
    return {};
  }
  TITAN_CHECK(!s.model_only(), "[train] checkpoint.initial_load_path=", dir, " is model-only, but "
              "checkpoint.initial_load_model_only is false. HINT: set --checkpoint.initial_load_model_only");
  restore_training(s, targets, optimizer, loader, dir);
  log_info(str("initial load from ", dir, " (step ", s.step, "): model, optimizer and data cursor"));
  return {s.step, s.tokens_seen, false};
}

// This run's own newest valid checkpoint (or checkpoint.load_step), when checkpointing is on and
// there is one.
std::optional<ckpt::CheckpointEntry> find_resume_checkpoint(const config::JobConfig& c, bool primary) {
  if (!c.checkpoint.enable) return std::nullopt;
  const std::string folder = checkpoint_folder(c);
  if (primary) ckpt::remove_stale_checkpoint_dirs(folder);
  std::optional<ckpt::CheckpointEntry> e = ckpt::find_checkpoint(folder, c.checkpoint.load_step, false);
  // A model-only checkpoint (a final save) ends a run; continuing past it needs the newest full one.
  if (e && e->step < c.training.steps && ckpt::checkpoint_is_model_only(e->path)) {
    log_info(str("[checkpoint] ", e->path, " is model-only; continuing to step ", c.training.steps,
                 " needs optimizer state"));
    e = ckpt::find_checkpoint(folder, c.checkpoint.load_step, true);
  }
  return e;
}

// At start: `resume` (this run's own checkpoint) when there is one, else a native
// checkpoint.initial_load_path, else nothing (fresh init; an HF initial load happened before the
// model was sharded).
ResumePoint load_checkpoint_at_start(const config::JobConfig& c, const std::optional<ckpt::CheckpointEntry>& resume,
                                     const RestoreTargets& targets, AdamW& optimizer, data::PrefetchLoader& loader) {
  if (resume) {
    const ckpt::TrainState s = ckpt::load_train_state(resume->path);
    restore_model_targets(s, targets, resume->path);
    if (!s.model_only()) restore_training(s, targets, optimizer, loader, resume->path);
    if (s.seed != static_cast<uint64_t>(c.training.seed)) {
      log_warn(str("[checkpoint] ", resume->path, " was saved by a run with training.seed ", s.seed, ", this run has ",
                   c.training.seed, " (the weights come from the checkpoint)"));
    }
    log_info(str("resuming from ", resume->path, " (step ", s.step, ", ", s.tokens_seen, " tokens seen)"));
    return {s.step, s.tokens_seen, true};
  }
  if (c.checkpoint.initial_load_path.empty() || c.checkpoint.initial_load_in_hf) return {};
  return load_initial_native(c, targets, optimizer, loader);
}

// One save at the end of `step`; logs how long the training thread was held up.
// Async: the previous write still reads the staging buffers, so it is waited for first (a stall
// only when saves come faster than the disk writes them).
void save_checkpoint(ckpt::CheckpointWriter& writer, StagingBuffers& staging, const config::JobConfig& c,
                     int64_t step, int64_t tokens_seen, const nn::ParameterList& model_state, const AdamW& optimizer,
                     const data::PrefetchLoader& loader, bool final_save) {
  const auto t0 = Clock::now();
  const bool model_only = final_save && c.checkpoint.last_save_model_only;
  if (writer.async()) writer.wait();
  writer.save(checkpoint_folder(c),
              capture_train_state(c, step, tokens_seen, model_state, optimizer, loader, model_only,
                                  writer.async() ? &staging : nullptr),
              c.checkpoint.keep_latest_k);
  log_info(str("checkpoint ", ckpt::step_dir_name(step), model_only ? " (model only)" : "",
               writer.async() ? " handed to the background writer" : " saved", " in ", checkpoint_folder(c),
               "; training stalled ", seconds_since(t0), " s"));
}

// The ranks of a multi-rank job: the mesh and FSDP over it.
struct Distributed {
  parallel::Comm& world;
  parallel::DeviceMesh mesh;
  std::unique_ptr<parallel::Fsdp> fsdp;  // null on one rank
  bool primary() const { return world.rank() == 0; }
};

ckpt::SaveGroup save_group(parallel::Comm& comm) {
  ckpt::SaveGroup g;
  g.rank = comm.rank();
  g.world = comm.size();
  g.all_gather = [&comm](const std::string& s) { return comm.all_gather_strings(s); };
  g.broadcast = [&comm](const std::string& s) { return comm.broadcast_string(s, 0); };
  return g;
}

// The multi-rank save (synchronous, a collective): every rank writes its pieces.
void save_sharded_checkpoint(Distributed& d, const config::JobConfig& c, int64_t step, int64_t tokens_seen,
                             nn::Decoder& model, const RestoreTargets& targets, const AdamW& optimizer,
                             const data::PrefetchLoader& loader, bool final_save) {
  const auto t0 = Clock::now();
  const bool model_only = final_save && c.checkpoint.last_save_model_only;
  const bool first_replica = d.mesh.dp_replicate().rank() == 0;
  const ckpt::TrainState s =
      capture_sharded_state(c, step, tokens_seen, targets.params, targets.layout, model.buffers(), optimizer, loader,
                            model_only, first_replica, d.mesh.tp().rank(), d.primary());
  ckpt::save_train_state_sharded(checkpoint_folder(c), s, save_group(d.world), model_only, c.checkpoint.keep_latest_k);
  log_info(str("checkpoint ", ckpt::step_dir_name(step), model_only ? " (model only)" : "", " saved by ",
               d.world.size(), " ranks in ", checkpoint_folder(c), "; training stalled ", seconds_since(t0), " s"));
}

}  // namespace

nn::DecoderConfig model_config(const config::JobConfig& c) {
  nn::DecoderConfig m = qwen3::model_config_for(c.model.name, c.model.hf_assets_path, c.model.n_layers);
  if (m.max_seq_len < c.training.seq_len) m.max_seq_len = c.training.seq_len;
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
  return m;
}

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

TrainSummary run_training(const config::JobConfig& c, const std::string& config_name) {
  // The job's ranks and their mesh first: every later check knows the data-parallel degree.
  parallel::Comm& world = parallel::world_comm();
  const config::ParallelismSection& ps = c.parallelism;
  const parallel::MeshDegrees degrees = parallel::resolve_mesh(
      {ps.data_parallel_replicate_degree, ps.data_parallel_shard_degree, ps.tensor_parallel_degree}, world.size());
  Distributed dist{world, parallel::DeviceMesh(world, degrees), nullptr};
  const int64_t tp = degrees.tp, tp_rank = dist.mesh.tp().rank();
  const bool sequence_parallel = tp > 1 && ps.enable_sequence_parallel;
  const int64_t dp_degree = degrees.dp();
  const int64_t dp_rank = dist.mesh.dp_rank();
  config::validate(c, dp_degree);
  const int64_t accumulation = config::accumulation_steps(c, dp_degree);
  const int64_t B = c.training.local_batch_size, T = c.training.seq_len;

  // Everything that can fail on bad input fails here, before any long work.
  const nn::DecoderConfig mc = model_config(c);
  const nn::DecoderConfig local_mc = parallel::tp_local_config(mc, tp);  // this rank's share under TP
  TITAN_CHECK(!sequence_parallel || (B * T) % tp == 0, "[parallel] sequence parallel splits a micro-batch's ", B * T,
              " tokens over tensor_parallel_degree = ", tp, ", which does not divide them. HINT: change "
              "training.local_batch_size / seq_len, or --no-parallelism.enable_sequence_parallel");
  // Plugins and overrides: the config tree with its replaced nodes, the model built from it, and
  // every module's shape constraint checked before anything else runs.
  const plugins::LoadedPlugins loaded = plugins::load_plugins(plugins::split_imports(c.overrides.imports));
  nn::ConfigTree tree = nn::decoder_config_tree(mc);
  if (!loaded.files.empty()) plugins::apply_overrides(tree, loaded.overrides);  // opt-in: imported ones only
  TITAN_CHECK(tp == 1 || loaded.files.empty(), "[parallel] plugin overrides are not tensor-parallel yet. HINT: "
              "use them with data_parallel_shard_degree, or drop override.imports");
  // The whole model first (init and HF loads are those of one rank); under TP each rank then
  // keeps its share and the whole one goes.
  auto whole = std::make_unique<nn::Decoder>(mc, tree);
  whole->check_shapes(B, T);
  if (world.size() > 1) {
    for (const auto& layer : whole->layers) {
      TITAN_CHECK(!layer->feed_forward || dynamic_cast<const nn::FeedForward*>(layer->feed_forward.get()) != nullptr,
                  "[parallel] a plugin feed-forward module cannot be sharded by FSDP yet (it may keep views of its "
                  "weights). HINT: run it on one rank, or drop its override.imports");
    }
  }
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
  if (dist.primary()) {
    ckpt::write_text_file_atomic((dump / "config.toml").string(),
                                 str("# titan train --config ", config_name, " (resolved)\n", config::to_toml(c)));
  }

  // Every rank reads the global batch's stream and keeps its own rows (dp_rank): the batches of
  // any mesh are those of one rank with local_batch_size x dp, so losses match across layouts and
  // the cursor (the same on every rank) resumes on any of them.
  data::LoaderConfig lc;
  lc.dataset.path = dataset_path(c);
  lc.batch_size = B * dp_degree;
  lc.seq_len = T;
  lc.eot_id = doc_tokens.eot_id;
  lc.bos_id = doc_tokens.bos_id;
  data::PrefetchLoader loader(lc, tokenizer);

  qwen3::init_weights(*whole, static_cast<uint64_t>(c.training.seed));
  const std::optional<ckpt::CheckpointEntry> resume = find_resume_checkpoint(c, dist.primary());
  if (!resume && c.checkpoint.initial_load_in_hf && !c.checkpoint.initial_load_path.empty()) load_initial_hf(c, *whole);
  std::unique_ptr<nn::Decoder> share;
  if (tp > 1) {
    share = std::make_unique<nn::Decoder>(local_mc);
    parallel::copy_tp_shard(*whole, *share, tp_rank, tp);
    whole.reset();
  }
  nn::Decoder& model = share ? *share : *whole;
  // FSDP detaches from the model when it goes: before the model does (dist outlives both).
  struct FsdpBeforeModel {
    Distributed& d;
    ~FsdpBeforeModel() { d.fsdp.reset(); }
  } fsdp_before_model{dist};
  parallel::TensorParallel tp_ops(dist.mesh.tp(), sequence_parallel);
  if (tp > 1) model.set_tensor_parallel(&tp_ops, tp_rank * local_mc.vocab_size);
  RestoreTargets targets;
  targets.buffers = model.buffers();
  if (world.size() > 1) {
    dist.fsdp = std::make_unique<parallel::Fsdp>(model, dist.mesh.dp_shard(), dist.mesh.dp_replicate(),
                                                 ps.fsdp_prefetch);
    targets.params = dist.fsdp->shards();
    for (size_t i = 0; i < targets.params.size(); ++i) {
      const parallel::ShardPiece& piece = dist.fsdp->pieces()[i];
      targets.layout.push_back(placement(targets.params[i]->fqn, piece.shape, piece.start, tp, tp_rank));
    }
    for (const auto& [name, shape] : dist.fsdp->full_parameters()) {
      targets.full_names.push_back(name);
      targets.full_shapes.push_back(placement(name, shape, 0, tp, tp_rank).shape);
    }
  } else {
    targets.params = model.parameters();
    for (const nn::Parameter* p : targets.params) {
      targets.layout.push_back({p->value.shape(), 0});
      targets.full_names.push_back(p->fqn);
      targets.full_shapes.push_back(p->value.shape());
    }
  }
  // The gradient norm counts a tensor-parallel replicated parameter once (on tp rank 0).
  nn::ParameterList counted;
  for (size_t i = 0; i < targets.params.size(); ++i) {
    if (targets.layout[i].tp_dim >= 0 || tp_rank == 0) counted.push_back(targets.params[i]);
  }
  const nn::ParameterList& params = targets.params;
  const nn::ParameterList model_state = model.state();  // single rank: what a checkpoint holds
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
               ", accumulation ", accumulation, ", data parallel ", dp_degree, ")"));
  if (dist.fsdp) {
    const double held = static_cast<double>(dist.fsdp->shard_numel());
    log_info(str("[parallel] ", world.size(), " ranks over ", world.backend(), ": ", degrees.describe(),
                 tp > 1 ? (sequence_parallel ? " (sequence parallel)" : " (no sequence parallel)") : "",
                 " | FSDP: this rank holds ", held / 1e6, "M of ", static_cast<double>(mc.num_params()) / 1e6,
                 "M parameters (", 16.0 * held / double(1 << 30),
                 " GiB with gradients and AdamW moments), blocks gathered just in time"));
  }
  // What stays allocated for the whole run: parameters (or this rank's shards), gradients, AdamW
  // moments, buffers, and the loader's batches.
  log_info(str("[memory] after setup: ", static_cast<double>(host_allocator().stats().live_bytes) / double(1 << 30),
               " GiB allocated (parameters, gradients, optimizer state, buffers)"));
  log_info(str("peak ", peak.flops / 1e12, " TFLOP/s (", peak.source, ") | dump folder ", dump.string()));
  log_info(str("training ", c.training.steps, " steps with config ", config_name));

  const ResumePoint start = load_checkpoint_at_start(c, resume, targets, optimizer, loader);
  TrainSummary summary;
  if (start.step >= c.training.steps && start.resumed) {
    log_info(str("nothing to do: the checkpoint is at step ", start.step, " and training.steps is ", c.training.steps,
                 ". HINT: raise --training.steps to train further"));
    return summary;
  }
  const bool async_save = c.checkpoint.async_mode == "async" && world.size() == 1;
  if (c.checkpoint.enable && c.checkpoint.async_mode == "async" && !async_save) {
    log_info("[checkpoint] multi-rank runs save synchronously (every rank writes its shard); async_mode ignored");
  }
  ckpt::CheckpointWriter checkpoint_writer(async_save);
  StagingBuffers staging;
  if (c.checkpoint.enable && checkpoint_writer.async()) {
    // Allocate (and fault in) the staging buffers now, so the first save stalls no longer than later ones.
    const auto t0 = Clock::now();
    capture_train_state(c, start.step, start.tokens_seen, model_state, optimizer, loader, false, &staging);
    log_info(str("[checkpoint] async staging buffers ready in ", seconds_since(t0), " s"));
  }
  int64_t tokens_seen = start.tokens_seen;

  MetricsOptions mo{dump.string(), c.metrics.log_freq, c.training.steps, c.metrics.enable_jsonl,
                    c.metrics.enable_tensorboard, c.metrics.save_tb_folder, config_name};
  mo.append = start.resumed;  // a resumed run continues its metrics.jsonl
  mo.files = dist.primary();
  mo.console = log_console_enabled();
  MetricsLogger metrics(mo);
  // Sums over the data-parallel ranks (each holds a different share of the batch).
  const auto dp_sum = [&](double x) {
    dist.mesh.dp().all_reduce_sum(&x, 1);
    return x;
  };
  // Squares of the gradient pieces: every shard once (replicas hold the same shard), every
  // tensor-parallel share once.
  const SquaresReducer grad_squares = [&](double x) {
    dist.mesh.dp_shard().all_reduce_sum(&x, 1);
    dist.mesh.tp().all_reduce_sum(&x, 1);
    return x;
  };
  const auto loop_start = Clock::now();
  std::vector<data::Batch> micro(static_cast<size_t>(accumulation));
  for (int64_t step = start.step + 1; step <= c.training.steps; ++step) {
    const auto t0 = Clock::now();
    host_allocator().reset_peak();
    if (dist.fsdp) dist.fsdp->reset_stats();
    tp_ops.reset_stats();
    const double waited_before = loader.seconds_waiting();
    // The whole step's micro-batches first: the loss is normalised by their total target count
    // (of the global batch: every rank sees it whole, then keeps its rows).
    int64_t targets_count = 0;
    for (data::Batch& b : micro) {
      std::optional<data::Batch> next = loader.next();
      TITAN_CHECK(next.has_value(), "[train] the data loader ended at step ", step);
      targets_count += ops::count_targets(next->labels_BT);  // labels of -100 would not count
      b = std::move(*next);
      if (dp_degree > 1) {
        b.inputs_BT = b.inputs_BT.narrow(0, dp_rank * B, B).clone();
        b.labels_BT = b.labels_BT.narrow(0, dp_rank * B, B).clone();
        b.positions_BT = b.positions_BT.narrow(0, dp_rank * B, B).clone();
      }
    }
    TITAN_CHECK(targets_count > 0, "[train] step ", step, " has no target tokens. HINT: check the dataset");

    if (dist.fsdp) {
      dist.fsdp->zero_grad();
    } else {
      model.zero_grad();
    }
    // Cross-entropy over the step's targets; the aux loss (aux_loss balancing) per micro-batch, as
    // HF computes it for one forward, averaged over the micro-batches (and the ranks).
    double loss_sum = 0.0, aux_sum = 0.0;
    const float aux_scale = 1.0f / static_cast<float>(accumulation * dp_degree);
    for (const data::Batch& b : micro) {
      const nn::LossResult r =
          model.forward_backward(b.inputs_BT, b.labels_BT, 1.0f / static_cast<float>(targets_count), aux_scale);
      loss_sum += r.loss_sum;
      aux_sum += r.aux_loss;
    }
    for (data::Batch& b : micro) b = data::Batch{};
    if (dist.fsdp) {
      dist.fsdp->reduce_replicas();
      // Replicated parameters whose input was split over tp ranks got partial gradients.
      for (nn::Parameter* p : tp > 1 ? params : nn::ParameterList{}) {
        if (qwen3::tp_grad_is_partial(p->fqn, sequence_parallel)) {
          dist.mesh.tp().all_reduce_sum(p->grad.data<float>(), p->grad.numel());
        }
      }
      loss_sum = dp_sum(loss_sum);
      aux_sum = dp_sum(aux_sum);
      for (auto& layer : model.layers) {
        if (!layer->moe) continue;
        std::vector<int64_t>& load = layer->moe->mutable_load();
        dist.mesh.dp().all_reduce_sum(load.data(), static_cast<int64_t>(load.size()));
      }
    }
    const double aux_loss = aux_sum / static_cast<double>(accumulation * dp_degree);
    const double loss = loss_sum / static_cast<double>(targets_count) + mc.router_aux_loss_coef * aux_loss;
    const double grad_norm =
        clip_grad_norm(params, c.training.max_norm, dist.fsdp ? grad_squares : nullptr, &counted);
    if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
      const std::string where = first_nonfinite_grad(params);
      TITAN_FAIL("[train] step ", step, ": loss ", loss, ", grad_norm ", grad_norm,
                 where.empty() ? std::string() : str(" (first non-finite gradient: ", where, ")"),
                 ". HINT: lower optimizer.lr, raise lr_scheduler.warmup_steps or set training.max_norm");
    }
    const double lr = c.optimizer.lr * schedule.factor(step);
    optimizer.step(lr);
    const nn::ExpertLoad load = model.expert_load();
    if (mc.load_balance == nn::LoadBalance::bias) {
      model.update_expert_bias();  // from this step's load; resets it
    } else {
      model.reset_expert_load();
    }

    StepMetrics m;
    m.step = step;
    m.loss = loss;
    m.grad_norm = grad_norm;
    m.lr = lr;
    m.tokens = B * T * accumulation;
    m.seconds = seconds_since(t0);
    m.tps = static_cast<double>(m.tokens) / m.seconds / static_cast<double>(tp);  // per rank (torchtitan)
    m.tflops = m.tps * flops_per_token / 1e12;
    m.mfu = 100.0 * m.tflops * 1e12 / peak.flops;
    m.memory_bytes = static_cast<double>(host_allocator().stats().peak_bytes);
    m.memory_percent = 100.0 * m.memory_bytes / memory_total;
    m.data_wait_seconds = loader.seconds_waiting() - waited_before;
    m.moe = load.defined;
    m.expert_load_min = load.min;
    m.expert_load_max = load.max;
    m.aux_loss = aux_loss;
    if (dist.fsdp) {
      for (const parallel::CommStats* cs : {&dist.fsdp->stats(), &tp_ops.stats()}) {
        m.comm_seconds += cs->seconds;
        m.comm_bytes += static_cast<double>(cs->all_gather_bytes + cs->reduce_scatter_bytes + cs->all_reduce_bytes);
      }
    }
    metrics.record(m);
    tokens_seen += m.tokens * dp_degree;
    if (c.checkpoint.enable && (step % c.checkpoint.interval == 0 || step == c.training.steps)) {
      if (dist.fsdp) {
        save_sharded_checkpoint(dist, c, step, tokens_seen, model, targets, optimizer, loader,
                                step == c.training.steps);
      } else {
        save_checkpoint(checkpoint_writer, staging, c, step, tokens_seen, model_state, optimizer, loader,
                        step == c.training.steps);
      }
    }
  }
  if (c.checkpoint.enable) {
    const auto t0 = Clock::now();
    checkpoint_writer.wait();  // the last async save; re-throws its error
    if (checkpoint_writer.async()) log_info(str("waited ", seconds_since(t0), " s for the last checkpoint write"));
  }
  if (c.checkpoint.last_save_in_hf) {
    // The whole model on every rank for the export (rank 0 writes it), then freed again.
    if (dist.fsdp) dist.fsdp->gather_full();
    if (tp > 1) {
      nn::Decoder gathered(mc);
      parallel::gather_tp_shards(model, gathered, dist.mesh.tp());
      if (dist.primary()) export_hf(c, gathered);
    } else if (dist.primary()) {
      export_hf(c, model);
    }
    if (dist.fsdp) dist.fsdp->release_full();
    world.barrier();
  }
  summary.seconds = seconds_since(loop_start);
  metrics.finish();
  summary.steps = metrics.history();
  log_info(str("done: ", c.training.steps, " steps in ", summary.seconds, " s; metrics, config.toml and loss.svg in ",
               dump.string()));
  return summary;
}

}  // namespace titan::train
