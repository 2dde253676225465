#include "titan/models/decoder/parallelize.h"

#include <algorithm>
#include <limits>
#include <map>

#include "titan/config/config_error.h"
#include "titan/core/error.h"
#include "titan/core/slices.h"
#include "titan/nn/feed_forward.h"

namespace titan::models {
namespace {

std::map<std::string, nn::Parameter*> by_name(nn::Decoder& model) {
  std::map<std::string, nn::Parameter*> out;
  for (nn::Parameter* p : model.parameters()) out[p->fqn] = p;
  return out;
}

// "layers.2,layers.4" -> {2, 4}; every point a layer index in (0, num_layers), ascending.
std::vector<int64_t> parse_split_points(const std::string& text, int64_t num_layers) {
  std::vector<int64_t> points;
  std::string rest = text;
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string item = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    const std::string prefix = "layers.";
    const std::string digits = item.starts_with(prefix) ? item.substr(prefix.size()) : "";
    if (digits.empty() || digits.size() >= 10 || digits.find_first_not_of("0123456789") != std::string::npos) {
      config::config_fail("[pipeline] parallelism.pipeline_parallel_split_points: '", item,
                          "' is not a layer name. HINT: write the first layer of each stage after the first, e.g. "
                          "layers.2,layers.4");
    }
    const int64_t layer = std::stoll(digits);
    if (layer <= 0 || layer >= num_layers || (!points.empty() && layer <= points.back())) {
      config::config_fail("[pipeline] parallelism.pipeline_parallel_split_points: ", item,
                          " leaves a stage empty (the model has ", num_layers,
                          " layers; points must be ascending, in layers.1 .. layers.", num_layers - 1, ")");
    }
    points.push_back(layer);
  }
  return points;
}

}  // namespace

PipelineLayout decoder_pipeline_layout(int64_t num_layers, int64_t pp, PipelineScheduleKind kind,
                                       int64_t layers_per_stage, const std::string& split_points) {
  return parallel::pipeline_layout(num_layers, pp, kind, layers_per_stage,
                                   split_points.empty() ? std::vector<int64_t>{}
                                                        : parse_split_points(split_points, num_layers));
}

int64_t decoder_stage_of(const PipelineLayout& layout, const std::string& fqn) {
  if (fqn.starts_with("tok_embeddings.")) return 0;
  if (!fqn.starts_with("layers.")) return layout.num_stages() - 1;
  return layout.stage_of_layer(std::stoll(fqn.substr(std::string("layers.").size())));
}

void copy_tp_shard(const ParallelPlan& plan, nn::Decoder& full, nn::Decoder& local, int64_t tp_rank,
                   int64_t tp_degree) {
  const std::map<std::string, nn::Parameter*> src = by_name(full);
  for (nn::Parameter* p : local.parameters()) {
    const Tensor& whole = src.at(p->fqn)->value;
    const int dim = plan.tp_split_dim(p->fqn);
    if (dim < 0) {
      p->value.copy_from(whole);
      continue;
    }
    TITAN_CHECK(whole.size(dim) == p->value.size(dim) * tp_degree, "[parallel] ", p->fqn, ": ", whole.describe(),
                " is not ", tp_degree, " x ", p->value.describe());
    const std::vector<int64_t> sections = plan.tp_sections(full.config(), p->fqn);
    p->value.copy_from(take_along(whole, dim, slice_indices(whole.size(dim), sections, tp_rank, tp_degree)));
  }
  for (size_t i = 0; i < local.buffers().size(); ++i) local.buffers()[i]->value.copy_from(full.buffers()[i]->value);
}

void gather_tp_shards(const ParallelPlan& plan, nn::Decoder& local, nn::Decoder& full, Comm& tp) {
  const std::map<std::string, nn::Parameter*> dst = by_name(full);
  const int64_t t = tp.size();
  for (nn::Parameter* p : local.parameters()) {
    Tensor& whole = dst.at(p->fqn)->value;
    const int dim = plan.tp_split_dim(p->fqn);
    const Tensor mine = p->value.contiguous();
    if (dim < 0) {
      whole.copy_from(mine);
      continue;
    }
    Tensor all = Tensor::empty({t * mine.numel()});
    tp.all_gather(mine, all);
    const std::vector<int64_t> sections = plan.tp_sections(full.config(), p->fqn);
    for (int64_t r = 0; r < t; ++r) {  // rank r's slice into its rows of `whole`
      put_along(whole, dim, slice_indices(whole.size(dim), sections, r, t),
                all.narrow(0, r * mine.numel(), mine.numel()).reshape(mine.shape()));
    }
  }
}

std::vector<nn::ParameterList> decoder_units(nn::Decoder& model) {
  std::vector<nn::ParameterList> units(1);
  if (model.tok_embeddings) model.tok_embeddings->collect(units[0]);  // a pipeline stage holds its part only
  if (model.norm) model.norm->collect(units[0]);
  if (model.output) model.output->collect(units[0]);  // nothing when tied
  for (auto& layer : model.layers) {
    units.emplace_back();
    layer->collect(units.back());
  }
  for (nn::ParameterList& unit : units) unit = nn::trainable(unit);  // a frozen base stays whole on every rank
  return units;
}

Parallelized::Parallelized(std::unique_ptr<nn::Decoder> whole, const ModelSpec& spec, DeviceMesh& mesh,
                           ParallelizeOptions options)
    : spec_(spec), mesh_(mesh), full_config_(whole->config()), pipeline_micro_rows_(options.pipeline_micro_rows),
      tp_(mesh.tp(), mesh.degrees().tp > 1 && options.sequence_parallel) {
  const int64_t tp = tp_degree(), rank = tp_rank();
  check(*whole, mesh);
  if (tp > 1) {
    // This rank's share is built and filled; the whole model goes.
    const nn::DecoderConfig local = spec.parallel_plan.tp_local_config(whole->config(), tp);
    model_ = options.build_local ? options.build_local(local) : spec.build(local, spec.config_tree(local));
    copy_tp_shard(spec.parallel_plan, *whole, *model_, rank, tp);
    whole.reset();
    model_->set_tensor_parallel(&tp_, rank * local.vocab_size);
  } else {
    model_ = std::move(whole);
  }
  if (pp_degree() > 1) {  // this rank's stages only: the other layers, and the embedding or head, go
    const int64_t pp_rank = mesh.pp().rank(), last = options.pipeline.num_stages() - 1;
    const std::vector<int64_t> stages = options.pipeline.stages_of(pp_rank);
    model_->keep_pipeline_part(options.pipeline.layers_of(pp_rank), stages.front() == 0, stages.back() == last);
    pipeline_ = std::make_unique<Pipeline>(*model_, mesh.pp(), options.pipeline, options.schedule,
                                           tp_.sequence_parallel() ? tp : 1);
  }
  if (mesh.degrees().ep > 1) split_experts();  // of this rank's stages' MoE blocks
  model_->set_compute_dtype(options.param_dtype);
  if (mesh.world().size() > 1) {
    std::vector<nn::ParameterList> units = decoder_units(*model_);
    for (nn::ParameterList& unit : units) {  // expert weights stay whole on their ranks
      std::erase_if(unit, [&](nn::Parameter* p) { return std::ranges::find(experts_, p) != experts_.end(); });
    }
    fsdp_ = std::make_unique<Fsdp>(std::move(units), mesh.dp_shard(), mesh.dp_replicate(),
                                   options.fsdp_prefetch && !pipeline_, options.param_dtype, options.reduce_dtype);
    model_->set_unit_hooks(fsdp_.get());
    shards_ = fsdp_->shards();
    pieces_ = fsdp_->pieces();
    full_ = fsdp_->full_parameters();
    is_copy_.assign(shards_.size(), 0);
    // Expert weights: ep rank r holds experts [r E_local, (r + 1) E_local), a flat range of each
    // global [E, ...] weight; the ep groups after the first in dp_shard hold copies.
    const bool first_group = mesh.dp_shard().rank() < mesh.degrees().ep;
    for (nn::Parameter* p : experts_) {
      Shape global = p->value.shape();
      global[0] *= mesh.degrees().ep;
      shards_.push_back(p);
      pieces_.push_back({global, mesh.ep().rank() * p->value.numel()});
      full_.emplace_back(p->fqn, global);
      is_copy_.push_back(first_group ? 0 : 1);
    }
  } else {
    shards_ = nn::trainable(model_->parameters());
    for (const nn::Parameter* p : shards_) {
      pieces_.push_back({p->value.shape(), 0});
      full_.emplace_back(p->fqn, p->value.shape());
    }
  }
  is_copy_.resize(shards_.size(), 0);
  for (size_t i = 0; i < shards_.size(); ++i) {
    nn::Parameter* p = shards_[i];
    if (tp_split_dim(p->fqn) < 0 && rank != 0) is_copy_[i] = 1;  // tp-replicated: tp rank 0 counts it
    if (!is_copy_[i]) norm_params_.push_back(p);
    if (tp > 1 && sharded() && spec.parallel_plan.tp_grad_is_partial(p->fqn, tp_.sequence_parallel())) {
      tp_partial_.push_back(p);
    }
    placements_.push_back(place(p->fqn, pieces_[i].shape, pieces_[i].start));
  }
  for (const auto& [name, shape] : full_) global_.emplace_back(name, place(name, shape, 0).shape);
  register_moe_balancing();
}

// Where a TP-local tensor (or a flat piece of one, at `start`) sits in its global parameter.
ckpt::TensorPiece Parallelized::place(const std::string& fqn, const Shape& local, int64_t start) const {
  ckpt::TensorPiece p;
  p.shape = local;
  p.start = start;
  const int dim = tp_split_dim(fqn);
  if (dim >= 0) {
    p.tp_dim = dim;
    p.tp_rank = mesh_.tp().rank();
    p.tp_degree = tp_degree();
    p.shape[static_cast<size_t>(dim)] *= tp_degree();
    p.tp_sections = spec_.parallel_plan.tp_sections(full_config_, fqn);
  }
  return p;
}

// This rank's experts of every MoE block (cut from the whole model's), exchanged through ep_.
void Parallelized::split_experts() {
  ep_ = std::make_unique<ExpertParallel>(mesh_.ep(), full_config_.num_experts);
  for (auto& layer : model_->layers) {
    if (!layer->moe) continue;
    layer->moe->set_expert_parallel(ep_.get());
    layer->moe->collect_experts(experts_);
  }
  experts_ = nn::trainable(experts_);
}

void Parallelized::check(nn::Decoder& whole, DeviceMesh& mesh) {
  if (mesh.world().size() == 1) return;
  // FSDP swaps each parameter's storage for a gathered one; a plugin's module may keep views of its
  // weights (kernel_lib's w13 does), so plugin modules with parameters stay on one rank for now.
  const nn::ParameterList params = whole.parameters();
  for (const std::string& path : whole.plugin_nodes()) {
    const std::string prefix = path.substr(std::string("model.").size()) + ".";
    for (const nn::Parameter* p : params) {
      TITAN_CHECK(!p->fqn.starts_with(prefix), "[parallel] ", path, " is a plugin module with parameters (", p->fqn,
                  "), which FSDP cannot shard yet (it may keep views of its weights). HINT: run it on one rank, or "
                  "drop its override.imports");
    }
  }
}

Parallelized::~Parallelized() {
  if (model_) model_->set_unit_hooks(nullptr);
  fsdp_.reset();
}

int Parallelized::tp_split_dim(const std::string& fqn) const {
  return tp_degree() > 1 ? spec_.parallel_plan.tp_split_dim(fqn) : -1;
}

int64_t Parallelized::shard_numel() const {
  if (fsdp_) return fsdp_->shard_numel();
  int64_t n = 0;
  for (const nn::Parameter* p : shards_) n += p->value.numel();
  return n;
}

void Parallelized::zero_grad() {
  if (fsdp_) {
    fsdp_->zero_grad();
    for (nn::Parameter* p : experts_) p->grad.zero_();
  } else {
    model_->zero_grad();
  }
}

void Parallelized::finish_grads() {
  if (!fsdp_) return;
  fsdp_->reduce_replicas();
  for (nn::Parameter* p : tp_partial_) mesh_.tp().all_reduce_sum(p->grad);
  // An expert's gradient already sums every token of its ep group routed to it (they came to this
  // rank); the other ep groups saw other tokens.
  if (mesh_.expert_dp().size() > 1) {
    for (nn::Parameter* p : experts_) mesh_.expert_dp().all_reduce_sum(p->grad);
  }
  for (auto& layer : model_->layers) {
    if (!layer->moe) continue;
    std::vector<int64_t>& load = layer->moe->load();
    mesh_.dp().all_reduce_sum(std::span<int64_t>(load));
  }
}

nn::LossResult Parallelized::forward_backward(const Tensor& ids_BT, const Tensor& labels_BT, float grad_scale,
                                              float forward_scale, const Tensor& positions_BT) {
  if (pipeline_) return pipeline_->run(ids_BT, labels_BT, pipeline_micro_rows_, grad_scale, forward_scale, positions_BT);
  return model_->forward_backward(ids_BT, labels_BT, grad_scale, forward_scale, positions_BT);
}

nn::LossResult Parallelized::forward_loss(const Tensor& ids_BT, const Tensor& labels_BT, const Tensor& positions_BT) {
  // The routers count what they route in any forward; a validation batch's counts must not reach
  // the next step's balancing hook or its metrics.
  std::vector<std::vector<int64_t>> loads;
  for (auto& layer : model_->layers) {
    if (layer->moe) loads.push_back(layer->moe->load());
  }
  nn::LossResult loss =
      pipeline_ ? pipeline_->forward_loss(ids_BT, labels_BT, positions_BT)
                : model_->forward_loss(ids_BT, labels_BT, positions_BT);
  size_t i = 0;
  for (auto& layer : model_->layers) {
    if (layer->moe) layer->moe->load() = std::move(loads[i++]);
  }
  return loss;
}

int64_t Parallelized::forwards_per_batch(int64_t rows) const {
  return pipeline_ ? rows / pipeline_micro_rows_ : 1;
}

double Parallelized::dp_sum(double x) {
  return fsdp_ ? mesh_.dp().sum(x) : x;
}

double Parallelized::pipeline_sum(double x) {
  return pipeline_ ? mesh_.pp().sum(x) : x;
}

double Parallelized::grad_squares(double local) {
  if (!fsdp_) return local;
  return pipeline_sum(mesh_.tp().sum(mesh_.dp_shard().sum(local)));
}

CommStats Parallelized::comm_stats() const {
  CommStats total;
  if (!fsdp_) return total;
  const CommStats none;
  for (const CommStats* s : {&fsdp_->stats(), &tp_.stats(), ep_ ? &ep_->stats() : &none}) {
    total.seconds += s->seconds;
    total.all_gather_bytes += s->all_gather_bytes;
    total.reduce_scatter_bytes += s->reduce_scatter_bytes;
    total.all_reduce_bytes += s->all_reduce_bytes;
    total.all_to_all_bytes += s->all_to_all_bytes;
  }
  if (pipeline_) {
    total.seconds += pipeline_->stats().seconds;
    total.send_bytes += pipeline_->stats().send_bytes;
  }
  return total;
}

void Parallelized::reset_comm_stats() {
  if (fsdp_) fsdp_->reset_stats();
  tp_.reset_stats();
  if (ep_) ep_->reset_stats();
  if (pipeline_) pipeline_->reset_stats();
}

// One assembly for every layout, in the order the dimensions were applied, undone: FSDP gathers
// each unit, each stage's ep ranks gather their experts, each stage's tp ranks gather their
// shards into a whole-shaped decoder, and under a pipeline the stages' tensors go to world rank 0,
// which calls fn.
void Parallelized::with_full_model(const std::function<void(const nn::Decoder&)>& fn) {
  if (fsdp_) fsdp_->gather_full();
  std::vector<Tensor> local_experts;
  gather_experts(local_experts);
  std::unique_ptr<nn::Decoder> gathered;  // TP: every tp rank gathers (a collective over tp)
  if (tp_degree() > 1) {
    gathered = build_model(spec_, full_config_);
    gather_tp_shards(spec_.parallel_plan, *model_, *gathered, mesh_.tp());
  }
  if (pipeline_) {
    collect_stages(gathered, fn);
  } else if (mesh_.world().rank() == 0) {
    fn(gathered ? *gathered : *model_);
  }
  if (fsdp_) fsdp_->release_full();
  for (size_t i = 0; i < local_experts.size(); ++i) experts_[i]->value = local_experts[i];
  mesh_.world().barrier();
}

// Every ep rank's experts gathered (in rank order: expert order) into the weights; this rank's
// own go to `local`, to be put back.
void Parallelized::gather_experts(std::vector<Tensor>& local) {
  for (nn::Parameter* p : experts_) {
    Shape global = p->value.shape();
    global[0] *= ep_degree();
    Tensor whole = Tensor::empty(global);
    mesh_.ep().all_gather(p->value, whole);
    local.push_back(p->value);
    p->value = whole;
  }
}

// A pipeline's stages, each whole on its ranks (in `gathered` under TP, else in the model): the
// first data-parallel, first tp rank of each stage sends its parameters and buffers (in state()
// order) to world rank 0, which places them by FQN into a whole decoder and calls fn.
void Parallelized::collect_stages(std::unique_ptr<nn::Decoder>& gathered,
                                  const std::function<void(const nn::Decoder&)>& fn) {
  if (mesh_.dp().rank() != 0 || mesh_.tp().rank() != 0) return;  // the ranks of world rank 0's pp group
  Comm& pp = mesh_.pp();
  const PipelineLayout& layout = pipeline_->layout();
  std::map<std::string, const Tensor*> mine;  // this stage's tensors, whole
  for (const nn::Parameter* p : model_->state()) mine[p->fqn] = &p->value;
  if (gathered) {
    for (nn::Parameter* p : gathered->state()) {
      if (mine.count(p->fqn)) mine[p->fqn] = &p->value;
    }
  }
  if (pp.rank() != 0) {
    for (const nn::Parameter* p : model_->state()) pp.send(*mine.at(p->fqn), 0, 0);
    return;
  }
  if (!gathered) gathered = build_model(spec_, full_config_);
  for (nn::Parameter* p : gathered->state()) {
    const int64_t owner = layout.owner(decoder_stage_of(layout, p->fqn));
    if (owner == 0) {
      TITAN_CHECK(mine.count(p->fqn), "[pipeline] rank 0 does not hold ", p->fqn);
      if (mine.at(p->fqn) != &p->value) p->value.copy_from(*mine.at(p->fqn));
    } else {
      pp.recv(p->value, static_cast<int>(owner), 0);
    }
  }
  fn(*gathered);
}

}  // namespace titan::models
