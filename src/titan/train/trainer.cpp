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

// The state after `step`: model_state (Decoder::state(): parameters and buffers) under their FQNs,
// the AdamW moments, the data cursor. With `staging` every tensor is copied into it (an async save writes while
// training changes the live ones); without, views of the live tensors (a synchronous save is done
// before they change).
ckpt::TrainState capture_train_state(const config::JobConfig& c, int64_t step, int64_t tokens_seen,
                                     const nn::ParameterList& model_state, const AdamW& optimizer,
                                     const data::PrefetchLoader& loader, bool model_only, StagingBuffers* staging) {
  if (staging != nullptr) staging->next = 0;
  const auto take = [&](const Tensor& live) { return staging != nullptr ? staging->copy_of(live) : live; };
  ckpt::TrainState s;
  s.step = step;
  s.tokens_seen = tokens_seen;
  s.seed = static_cast<uint64_t>(c.training.seed);
  s.optimizer_step = optimizer.step_count();
  s.loader_state_json = loader.state().to_json();
  s.config_toml = config::to_toml(c);
  for (const nn::Parameter* p : model_state) s.model.emplace_back(p->fqn, take(p->value));
  if (model_only) return s;
  const nn::ParameterList& params = optimizer.params();
  for (size_t i = 0; i < params.size(); ++i) {
    s.optimizer.emplace_back(params[i]->fqn + ".exp_avg", take(optimizer.exp_avg(i)));
    s.optimizer.emplace_back(params[i]->fqn + ".exp_avg_sq", take(optimizer.exp_avg_sq(i)));
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


// Optimizer moments, the data cursor (and, by returning them, step and tokens seen).
void restore_training(const ckpt::TrainState& s, AdamW& optimizer, data::PrefetchLoader& loader,
                      const std::string& dir) {
  std::vector<std::string> names;
  std::vector<Shape> shapes;
  for (const nn::Parameter* p : optimizer.params()) {
    for (const char* suffix : {".exp_avg", ".exp_avg_sq"}) {
      names.push_back(p->fqn + suffix);
      shapes.push_back(p->value.shape());
    }
  }
  const std::vector<Tensor> moments = match_tensors(s.optimizer, names, shapes, dir + "/optimizer.safetensors");
  std::vector<Tensor> m, v;
  for (size_t i = 0; i < moments.size(); i += 2) {
    m.push_back(moments[i]);
    v.push_back(moments[i + 1]);
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
ResumePoint load_initial_native(const config::JobConfig& c, const nn::ParameterList& model_state, AdamW& optimizer,
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
  restore_model(s, model_state, dir);
  if (model_only) {
    log_info(str("initial load (model only) from ", dir, " (saved at step ", s.step, ")"));
    return {};
  }
  TITAN_CHECK(!s.model_only(), "[train] checkpoint.initial_load_path=", dir, " is model-only, but "
              "checkpoint.initial_load_model_only is false. HINT: set --checkpoint.initial_load_model_only");
  restore_training(s, optimizer, loader, dir);
  log_info(str("initial load from ", dir, " (step ", s.step, "): model, optimizer and data cursor"));
  return {s.step, s.tokens_seen, false};
}

// At start: this run's own newest valid checkpoint (or checkpoint.load_step) when there is one,
// else checkpoint.initial_load_path, else nothing (fresh init).
ResumePoint load_checkpoint_at_start(const config::JobConfig& c, nn::Decoder& model, AdamW& optimizer,
                                     data::PrefetchLoader& loader) {
  if (c.checkpoint.enable) {
    const std::string folder = checkpoint_folder(c);
    ckpt::remove_stale_checkpoint_dirs(folder);
    std::optional<ckpt::CheckpointEntry> e = ckpt::find_checkpoint(folder, c.checkpoint.load_step, false);
    // A model-only checkpoint (a final save) ends a run; continuing past it needs the newest full one.
    if (e && e->step < c.training.steps && ckpt::checkpoint_is_model_only(e->path)) {
      log_info(str("[checkpoint] ", e->path, " is model-only; continuing to step ", c.training.steps,
                   " needs optimizer state"));
      e = ckpt::find_checkpoint(folder, c.checkpoint.load_step, true);
    }
    if (e) {
      const ckpt::TrainState s = ckpt::load_train_state(e->path);
      restore_model(s, model.state(), e->path);
      if (!s.model_only()) restore_training(s, optimizer, loader, e->path);
      if (s.seed != static_cast<uint64_t>(c.training.seed)) {
        log_warn(str("[checkpoint] ", e->path, " was saved by a run with training.seed ", s.seed, ", this run has ",
                     c.training.seed, " (the weights come from the checkpoint)"));
      }
      log_info(str("resuming from ", e->path, " (step ", s.step, ", ", s.tokens_seen, " tokens seen)"));
      return {s.step, s.tokens_seen, true};
    }
  }
  if (c.checkpoint.initial_load_path.empty()) return {};
  if (c.checkpoint.initial_load_in_hf) {
    load_initial_hf(c, model);
    return {};
  }
  return load_initial_native(c, model.state(), optimizer, loader);
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
  const int64_t dp_degree = 1;  // one rank until the parallelism issue brings the mesh
  config::validate(c, dp_degree);
  const int64_t accumulation = config::accumulation_steps(c, dp_degree);
  const int64_t B = c.training.local_batch_size, T = c.training.seq_len;

  // Everything that can fail on bad input fails here, before any long work.
  const nn::DecoderConfig mc = model_config(c);
  // Plugins and overrides: the config tree with its replaced nodes, the model built from it, and
  // every module's shape constraint checked before anything else runs.
  const plugins::LoadedPlugins loaded = plugins::load_plugins(plugins::split_imports(c.overrides.imports));
  nn::ConfigTree tree = nn::decoder_config_tree(mc);
  if (!loaded.files.empty()) plugins::apply_overrides(tree, loaded.overrides);  // opt-in: imported ones only
  nn::Decoder model(mc, tree);
  model.check_shapes(B, T);
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

  qwen3::init_weights(model, static_cast<uint64_t>(c.training.seed));
  nn::ParameterList params = model.parameters();
  const nn::ParameterList model_state = model.state();
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

  const ResumePoint start = load_checkpoint_at_start(c, model, optimizer, loader);
  TrainSummary summary;
  if (start.step >= c.training.steps && start.resumed) {
    log_info(str("nothing to do: the checkpoint is at step ", start.step, " and training.steps is ", c.training.steps,
                 ". HINT: raise --training.steps to train further"));
    return summary;
  }
  ckpt::CheckpointWriter checkpoint_writer(c.checkpoint.async_mode == "async");
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
  MetricsLogger metrics(mo);
  const auto loop_start = Clock::now();
  std::vector<data::Batch> micro(static_cast<size_t>(accumulation));
  for (int64_t step = start.step + 1; step <= c.training.steps; ++step) {
    const auto t0 = Clock::now();
    host_allocator().reset_peak();
    const double waited_before = loader.seconds_waiting();
    // The whole step's micro-batches first: the loss is normalised by their total target count.
    int64_t targets = 0;
    for (data::Batch& b : micro) {
      std::optional<data::Batch> next = loader.next();
      TITAN_CHECK(next.has_value(), "[train] the data loader ended at step ", step);
      b = std::move(*next);
      targets += ops::count_targets(b.labels_BT);  // labels of -100 would not count
    }
    TITAN_CHECK(targets > 0, "[train] step ", step, " has no target tokens. HINT: check the dataset");

    model.zero_grad();
    // Cross-entropy over the step's targets; the aux loss (aux_loss balancing) per micro-batch, as
    // HF computes it for one forward, averaged over the micro-batches.
    double loss_sum = 0.0, aux_sum = 0.0;
    const float aux_scale = 1.0f / static_cast<float>(accumulation);
    for (const data::Batch& b : micro) {
      const nn::LossResult r =
          model.forward_backward(b.inputs_BT, b.labels_BT, 1.0f / static_cast<float>(targets), aux_scale);
      loss_sum += r.loss_sum;
      aux_sum += r.aux_loss;
    }
    for (data::Batch& b : micro) b = data::Batch{};
    const double aux_loss = aux_sum / static_cast<double>(accumulation);
    const double loss = loss_sum / static_cast<double>(targets) + mc.router_aux_loss_coef * aux_loss;
    const double grad_norm = clip_grad_norm(params, c.training.max_norm);
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
    m.tps = static_cast<double>(m.tokens) / m.seconds;
    m.tflops = m.tps * flops_per_token / 1e12;
    m.mfu = 100.0 * m.tflops * 1e12 / peak.flops;
    m.memory_bytes = static_cast<double>(host_allocator().stats().peak_bytes);
    m.memory_percent = 100.0 * m.memory_bytes / memory_total;
    m.data_wait_seconds = loader.seconds_waiting() - waited_before;
    m.moe = load.defined;
    m.expert_load_min = load.min;
    m.expert_load_max = load.max;
    m.aux_loss = aux_loss;
    metrics.record(m);
    tokens_seen += m.tokens * dp_degree;
    if (c.checkpoint.enable && (step % c.checkpoint.interval == 0 || step == c.training.steps)) {
      save_checkpoint(checkpoint_writer, staging, c, step, tokens_seen, model_state, optimizer, loader,
                      step == c.training.steps);
    }
  }
  if (c.checkpoint.enable) {
    const auto t0 = Clock::now();
    checkpoint_writer.wait();  // the last async save; re-throws its error
    if (checkpoint_writer.async()) log_info(str("waited ", seconds_since(t0), " s for the last checkpoint write"));
  }
  if (c.checkpoint.last_save_in_hf) export_hf(c, model);
  summary.seconds = seconds_since(loop_start);
  metrics.finish();
  summary.steps = metrics.history();
  log_info(str("done: ", c.training.steps, " steps in ", summary.seconds, " s; metrics, config.toml and loss.svg in ",
               dump.string()));
  return summary;
}

}  // namespace titan::train
