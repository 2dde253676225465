// Muon (torch.optim.Muon; Keller Jordan's optimizer, as Moonlight scales it): the hidden layers'
// matrices are updated by the Newton–Schulz orthogonalisation of their Nesterov momentum, and
// everything Muon does not take (embeddings, the head, norms, biases) by AdamW, with one step
// count and one scheduled lr for both groups (torchtitan / Moonlight split them the same way).
// Per Muon parameter W of shape [..., A, B] (A fan-out, B fan-in; a leading dimension stacks
// MoE experts, each its own matrix) and step, with g its (clipped) gradient:
//   buf = lerp(buf, g, 1 - momentum);  u = nesterov ? lerp(g, buf, momentum) : buf
//   O   = newton_schulz(u)                        (ops/newton_schulz.h: bf16, torch's roundings)
//   W   = W * (1 - lr * weight_decay) - adjusted_lr(lr, A, B) * O
// adjusted_lr is torch's _adjust_lr: original sqrt(max(1, A / B)); match_rms_adamw
// 0.2 sqrt(max(A, B)) (Moonlight: the update's RMS matches AdamW's, so one lr and weight decay
// serve both groups; our default); spectral_unclamped sqrt(A / B).
// Sharded parameters (FSDP pieces, TP slices, expert shards): the orthogonalisation needs the whole
// matrix, so each step assembles it over `group` (the ranks of one data-parallel replica and one
// pipeline stage, which together hold every element once: each contributes its pieces, one
// all-reduce), the matrix's owner rank (index mod group size) orthogonalises it, and a broadcast
// brings the result back for every rank to take its pieces: torchtitan's DistMuon, the
// computation spread over the ranks. HSDP replicas do the same work on the same values.
// The state is one momentum buffer per Muon parameter ("<fqn>.momentum_buffer" in checkpoints, f32)
// beside the AdamW moments of the rest.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "titan/checkpoint/train_state.h"
#include "titan/ops/newton_schulz/newton_schulz.h"
#include "titan/parallel/comm.h"
#include "titan/train/optimizer.h"

namespace titan::train {

enum class MuonLrAdjust { original, match_rms_adamw, spectral_unclamped };

// "original" | "match_rms_adamw" | "spectral_unclamped"; throws naming the value otherwise.
MuonLrAdjust parse_muon_lr_adjust(const std::string& name);
// The lr an A x B matrix is updated with (torch.optim.Muon's _adjust_lr).
double muon_adjusted_lr(double lr, MuonLrAdjust how, int64_t a, int64_t b);

struct MuonConfig {
  double momentum = 0.95;
  bool nesterov = true;
  ops::NewtonSchulzArgs newton_schulz;
  MuonLrAdjust adjust_lr = MuonLrAdjust::match_rms_adamw;
  double weight_decay = 0.1;
};

// A checkpoint's optimizer state (`saved`, from the file `where`) was written by the optimizer this
// run uses (Muon: "<fqn>.momentum_buffer" tensors; AdamW: none); else a one-line error naming both.
void check_optimizer_kind(const ckpt::NamedTensors& saved, bool muon, const std::string& where);

class Muon final : public Optimizer {
 public:
  // params: this rank's trained tensors; places[i]: where params[i] sits in its global parameter
  // (ckpt::TensorPiece; {its shape, 0} when whole); copies[i]: another rank of `group` holds the
  // same elements (a TP-replicated parameter off tp rank 0, another ep group's experts).
  // matrices: the global parameters Muon updates (FQN, global shape of >= 2 dimensions), the same
  // list in the same order on every rank of `group`; the params named there are Muon's, the rest
  // AdamW's. group: null on one rank.
  // Throws naming the parameter when a Muon parameter is not f32 with a gradient of its shape.
  Muon(nn::ParameterList params, std::vector<ckpt::TensorPiece> places, std::vector<char> copies,
       std::vector<std::pair<std::string, Shape>> matrices, parallel::Comm* group, MuonConfig muon,
       AdamWConfig adamw);
  ~Muon() override;

  void step(double lr) override;
  int64_t step_count() const override { return step_count_; }
  size_t num_params() const override { return params_.size(); }
  std::vector<std::string> state_names(const std::string& fqn) const override;
  const Tensor& state(size_t i, size_t k) const override;
  void restore(int64_t step_count, const std::vector<std::vector<Tensor>>& states) override;

  bool takes(size_t i) const { return slot_[i] >= 0; }  // params()[i] is a Muon parameter
  // For the start-up log: "Muon on 14 matrices (0.92M parameters; momentum 0.95, nesterov, 5
  // Newton-Schulz steps, lr match_rms_adamw), AdamW on 9 other parameters (0.07M)".
  std::string describe() const;
  const nn::ParameterList& params() const { return params_; }

 private:
  struct Run {  // piece elements [local, local + length) are the matrix's [global, global + length)
    int64_t global, local, length;
  };
  struct Piece {  // one Muon parameter piece on this rank
    size_t param;     // index into params_
    size_t matrix;    // index into matrices_
    bool copy;
    std::vector<Run> runs;
    Tensor buf, update;  // momentum buffer, and this step's update before orthogonalisation
  };

  nn::ParameterList params_;
  std::vector<std::pair<std::string, Shape>> matrices_;
  parallel::Comm* group_;
  MuonConfig cfg_;
  std::vector<int64_t> slot_;        // per param: its index in pieces_, or -1 (AdamW's)
  std::vector<int64_t> adamw_slot_;  // per param: its index in adamw_'s list, or -1
  std::vector<Piece> pieces_;
  std::vector<std::vector<size_t>> pieces_of_;  // per matrix: its pieces on this rank (indices into pieces_)
  std::unique_ptr<AdamW> adamw_;
  int64_t step_count_ = 0;
};

}  // namespace titan::train
