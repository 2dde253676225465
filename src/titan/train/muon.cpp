#include "titan/train/muon.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "titan/core/error.h"
#include "titan/core/slices.h"
#include "titan/ops/muon_update/muon_update.h"

namespace titan::train {
namespace {

// The runs of a piece of `length` elements placed at `place` in its global parameter: the TP slice
// (if any) is cut from the parameter along tp_dim, then the piece is slice elements
// [start, start + length).
std::vector<std::pair<int64_t, int64_t>> global_offsets(const ckpt::TensorPiece& place, int64_t length) {
  std::vector<std::pair<int64_t, int64_t>> runs;  // (global offset, run length), in local order
  if (place.tp_dim < 0) {
    runs.emplace_back(place.start, length);
    return runs;
  }
  const auto d = static_cast<size_t>(place.tp_dim);
  const std::vector<int64_t> idx =
      slice_indices(place.shape[d], place.tp_sections, place.tp_rank, place.tp_degree);
  int64_t inner = 1;
  for (size_t k = d + 1; k < place.shape.size(); ++k) inner *= place.shape[k];
  const auto rows = static_cast<int64_t>(idx.size());
  for (int64_t f = place.start, end = place.start + length; f < end;) {
    const int64_t r = f % inner, j = (f / inner) % rows, o = f / (inner * rows);
    const int64_t n = std::min(inner - r, end - f);
    runs.emplace_back((o * place.shape[d] + idx[static_cast<size_t>(j)]) * inner + r, n);
    f += n;
  }
  return runs;
}

}  // namespace

void check_optimizer_kind(const ckpt::NamedTensors& saved, bool muon, const std::string& where) {
  if (saved.empty()) return;  // a model-only save: nothing to mismatch
  const bool by_muon = std::ranges::any_of(saved, [](const auto& t) { return t.first.ends_with(".momentum_buffer"); });
  const char* writer = by_muon ? "Muon" : "AdamW";
  TITAN_CHECK(by_muon == muon, "[train] ", where, " holds ", writer, " state but this run's optimizer is ",
              muon ? "Muon" : "AdamW", ". HINT: resume with optimizer.name ", writer,
              ", or load the weights only (checkpoint.initial_load_path with checkpoint.initial_load_model_only)");
}

MuonLrAdjust parse_muon_lr_adjust(const std::string& name) {
  if (name == "original") return MuonLrAdjust::original;
  if (name == "match_rms_adamw") return MuonLrAdjust::match_rms_adamw;
  if (name == "spectral_unclamped") return MuonLrAdjust::spectral_unclamped;
  throw_error(str("optimizer.muon_adjust_lr='", name,
                  "' is not original, match_rms_adamw or spectral_unclamped"), __FILE__, __LINE__);
}

double muon_adjusted_lr(double lr, MuonLrAdjust how, int64_t a, int64_t b) {
  const double A = static_cast<double>(a), B = static_cast<double>(b);
  switch (how) {
    case MuonLrAdjust::original: return lr * std::sqrt(std::max(1.0, A / B));
    case MuonLrAdjust::match_rms_adamw: return lr * 0.2 * std::sqrt(std::max(A, B));
    case MuonLrAdjust::spectral_unclamped: return lr * std::sqrt(A / B);
  }
  return lr;
}

Muon::Muon(nn::ParameterList params, std::vector<ckpt::TensorPiece> places, std::vector<char> copies,
           std::vector<std::pair<std::string, Shape>> matrices, parallel::Comm* group, MuonConfig muon,
           AdamWConfig adamw)
    : params_(std::move(params)), matrices_(std::move(matrices)), group_(group), cfg_(muon) {
  TITAN_CHECK(places.size() == params_.size() && copies.size() == params_.size(), "[muon] ", params_.size(),
              " parameters but ", places.size(), " places and ", copies.size(), " copy flags (internal)");
  TITAN_CHECK(cfg_.momentum >= 0.0 && cfg_.momentum < 1.0 && cfg_.weight_decay >= 0.0,
              "[muon] momentum=", cfg_.momentum, " must be in [0, 1) and weight_decay=", cfg_.weight_decay, " >= 0");
  std::map<std::string, size_t> matrix_of;
  for (size_t j = 0; j < matrices_.size(); ++j) {
    TITAN_CHECK(matrices_[j].second.size() >= 2, "[muon] ", matrices_[j].first, " is ",
                shape_str(matrices_[j].second), ": Muon orthogonalises matrices (>= 2 dimensions)");
    matrix_of[matrices_[j].first] = j;
  }
  nn::ParameterList rest;
  for (size_t i = 0; i < params_.size(); ++i) {
    nn::Parameter* p = params_[i];
    const auto it = matrix_of.find(p->fqn);
    if (it == matrix_of.end()) {
      slot_.push_back(-1);
      adamw_slot_.push_back(static_cast<int64_t>(rest.size()));
      rest.push_back(p);
      continue;
    }
    TITAN_CHECK(p->value.dtype() == DType::f32 && p->value.is_contiguous() && p->grad.defined() &&
                    p->grad.shape() == p->value.shape(),
                "[muon] ", p->fqn, ": expected a contiguous f32 value with a gradient of its shape, got ",
                p->value.describe());
    TITAN_CHECK(places[i].shape == matrices_[it->second].second, "[muon] ", p->fqn, " is placed in ",
                shape_str(places[i].shape), " but its matrix is ", shape_str(matrices_[it->second].second),
                " (internal)");
    Piece piece{i, it->second, copies[i] != 0, {}, {}, {}};
    int64_t local = 0;
    for (const auto& [global, n] : global_offsets(places[i], p->value.numel())) {
      piece.runs.push_back({global, local, n});
      local += n;
    }
    piece.buf = Tensor::zeros(p->value.shape(), DType::f32, p->value.device());
    piece.update = Tensor::empty(p->value.shape(), DType::f32, p->value.device());
    slot_.push_back(static_cast<int64_t>(pieces_.size()));
    adamw_slot_.push_back(-1);
    pieces_.push_back(std::move(piece));
  }
  pieces_of_.resize(matrices_.size());
  for (size_t k = 0; k < pieces_.size(); ++k) pieces_of_[pieces_[k].matrix].push_back(k);
  adamw_ = std::make_unique<AdamW>(std::move(rest), adamw);
}

Muon::~Muon() = default;

void Muon::step(double lr) {
  ++step_count_;
  adamw_->step(lr);
  for (Piece& piece : pieces_) {
    ops::muon_momentum(piece.buf, params_[piece.param]->grad, piece.update, cfg_.momentum, cfg_.nesterov);
  }
  const bool shared = group_ != nullptr && group_->size() > 1;
  for (size_t j = 0; j < matrices_.size(); ++j) {
    const Shape& shape = matrices_[j].second;
    std::vector<Piece*> mine;
    for (size_t k : pieces_of_[j]) mine.push_back(&pieces_[k]);
    if (!shared && mine.empty()) continue;
    const Device device = mine.empty() ? params_.empty() ? Device::cpu : params_[0]->value.device()
                                       : params_[mine[0]->param]->value.device();
    const bool values = device != Device::meta;
    const int64_t a = shape[shape.size() - 2], b = shape[shape.size() - 1];
    const double step = muon_adjusted_lr(lr, cfg_.adjust_lr, a, b);
    Tensor orth = Tensor::empty(shape, DType::f32, device);
    // One rank holding the whole matrix (its one piece is the matrix): orthogonalise it in place of
    // assembling a copy.
    if (!shared && mine.size() == 1 && mine[0]->update.shape() == shape) {
      ops::newton_schulz(mine[0]->update, orth, cfg_.newton_schulz);
      ops::muon_apply(params_[mine[0]->param]->value, orth, 1.0 - lr * cfg_.weight_decay, step);
      continue;
    }
    // The whole update matrix: this rank's pieces (a copy is contributed by the rank that owns it).
    Tensor whole = Tensor::zeros(shape, DType::f32, device);
    for (const Piece* piece : mine) {
      if (piece->copy || !values) continue;
      const float* src = piece->update.data<float>();
      float* dst = whole.data<float>();
      for (const Run& r : piece->runs) std::memcpy(dst + r.global, src + r.local, sizeof(float) * r.length);
    }
    if (shared) group_->all_reduce_sum(whole);
    const int owner = shared ? static_cast<int>(j % static_cast<size_t>(group_->size())) : 0;
    if (!shared || group_->rank() == owner) ops::newton_schulz(whole, orth, cfg_.newton_schulz);
    if (shared && values) group_->broadcast(orth, owner);
    for (Piece* piece : mine) {
      if (values) {  // this piece's elements of the orthogonalised matrix, into its update buffer
        const float* src = orth.data<float>();
        float* dst = piece->update.data<float>();
        for (const Run& r : piece->runs) std::memcpy(dst + r.local, src + r.global, sizeof(float) * r.length);
      }
      ops::muon_apply(params_[piece->param]->value, piece->update, 1.0 - lr * cfg_.weight_decay, step);
    }
  }
}

std::string Muon::describe() const {
  int64_t muon = 0, rest = 0, others = 0;
  for (const auto& [fqn, shape] : matrices_) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    muon += n;
  }
  std::vector<std::string> seen;  // this rank's AdamW parameters (pieces count once per FQN)
  for (size_t i = 0; i < params_.size(); ++i) {
    if (slot_[i] >= 0) continue;
    rest += params_[i]->value.numel();
    if (std::find(seen.begin(), seen.end(), params_[i]->fqn) == seen.end()) seen.push_back(params_[i]->fqn);
  }
  others = static_cast<int64_t>(seen.size());
  const char* adjust = cfg_.adjust_lr == MuonLrAdjust::original           ? "original"
                       : cfg_.adjust_lr == MuonLrAdjust::match_rms_adamw ? "match_rms_adamw"
                                                                         : "spectral_unclamped";
  return str("Muon on ", matrices_.size(), " matrices (", static_cast<double>(muon) / 1e6, "M parameters; momentum ",
             cfg_.momentum, cfg_.nesterov ? ", nesterov, " : ", ", cfg_.newton_schulz.steps,
             " Newton-Schulz steps in bf16, lr adjusted ", adjust, "), AdamW on ", others, " other parameters (",
             static_cast<double>(rest) / 1e6, "M on this rank)");
}

std::vector<std::string> Muon::state_names(const std::string& fqn) const {
  for (const auto& [name, shape] : matrices_) {
    if (name == fqn) return {"momentum_buffer"};
  }
  return adamw_->state_names(fqn);
}

const Tensor& Muon::state(size_t i, size_t k) const {
  TITAN_CHECK(i < params_.size(), "[muon] state(", i, "): only ", params_.size(), " parameters");
  if (slot_[i] >= 0) return pieces_[static_cast<size_t>(slot_[i])].buf;
  return adamw_->state(static_cast<size_t>(adamw_slot_[i]), k);
}

void Muon::restore(int64_t step_count, const std::vector<std::vector<Tensor>>& states) {
  TITAN_CHECK(step_count >= 0, "[muon] restore: step count must be >= 0, got ", step_count);
  TITAN_CHECK(states.size() == params_.size(), "[muon] restore: expected the state of ", params_.size(),
              " parameters, got ", states.size(), ". HINT: the checkpoint was saved from a different model");
  std::vector<std::vector<Tensor>> rest;
  for (size_t i = 0; i < params_.size(); ++i) {
    if (slot_[i] < 0) {
      rest.push_back(states[i]);
      continue;
    }
    TITAN_CHECK(states[i].size() == 1 && states[i][0].defined() && states[i][0].shape() == params_[i]->value.shape(),
                "[muon] restore ", params_[i]->fqn, ".momentum_buffer: expected one tensor of shape ",
                shape_str(params_[i]->value.shape()));
  }
  adamw_->restore(step_count, rest);  // checks the AdamW group, changes nothing on throw
  for (size_t i = 0; i < params_.size(); ++i) {
    if (slot_[i] >= 0) pieces_[static_cast<size_t>(slot_[i])].buf.copy_from(states[i][0]);
  }
  step_count_ = step_count;
}

}  // namespace titan::train
