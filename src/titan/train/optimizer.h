// The optimizers: what the trainer steps and the checkpointer saves. Optimizer is the interface;
// AdamW (here) and Muon (train/muon.h, with AdamW for what Muon does not take) implement it.
//
// AdamW over a list of parameters (torch.optim.AdamW with foreach=False, amsgrad=False), one
// ops::adamw_step per parameter. Moments (exp_avg m, exp_avg_sq v) are tensors shaped like each
// parameter, zero at construction, stored in f32 or (state_dtype bf16, optimizer.state_dtype)
// bf16: updated in f32, rounded to nearest even on store (ops/adamw/adamw.h says why).
// Weight decay applies to every parameter, norms and embeddings included: torchtitan builds one
// param group with weight_decay for all parameters by default, and we match it.
// Step counting: step(lr) first increments step_count, then updates with bias corrections for
// that count, so after the first step() step_count() == 1 (torch's state["step"]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "titan/core/tensor.h"
#include "titan/nn/parameter.h"

namespace titan::train {

// Defaults are torchtitan's ([optimizer] beta1/beta2/eps/weight_decay); lr comes per step.
struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  DType state_dtype = DType::f32;  // the moments' storage: f32 or bf16
};

// One update per step over this rank's parameters (or their pieces), and per parameter its state
// tensors, each shaped like the parameter, for checkpoints: saved as "<fqn>.<state name>".
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step(double lr) = 0;  // lr already scheduled
  virtual int64_t step_count() const = 0;
  virtual size_t num_params() const = 0;
  // The names of the state tensors of parameter `fqn` ("exp_avg", "exp_avg_sq"; "momentum_buffer"),
  // the same on every rank (a rank may hold no piece of it); state(i, k): params()[i]'s k-th.
  virtual std::vector<std::string> state_names(const std::string& fqn) const = 0;
  virtual const Tensor& state(size_t i, size_t k) const = 0;
  // Restores a checkpointed state: the step count and states[i][k] for each name k of
  // state_names(params()[i]'s FQN), shaped like that parameter (converted to the state's dtype).
  // Throws naming the parameter on a count or shape mismatch; on throw nothing changes.
  virtual void restore(int64_t step_count, const std::vector<std::vector<Tensor>>& states) = 0;
};

class AdamW final : public Optimizer {
 public:
  // Throws if a parameter is undefined, its grad is not shaped like it, or cfg is out of range.
  AdamW(nn::ParameterList params, AdamWConfig cfg);

  // One update of every parameter from its .grad at learning rate `lr` (already scheduled).
  void step(double lr) override;

  int64_t step_count() const override { return step_count_; }
  size_t num_params() const override { return params_.size(); }
  std::vector<std::string> state_names(const std::string&) const override { return {"exp_avg", "exp_avg_sq"}; }
  const Tensor& state(size_t i, size_t k) const override { return k == 0 ? exp_avg(i) : exp_avg_sq(i); }
  void restore(int64_t step_count, const std::vector<std::vector<Tensor>>& states) override;
  const nn::ParameterList& params() const { return params_; }
  const AdamWConfig& config() const { return cfg_; }

  // Moments of params()[i], for checkpoints.
  const Tensor& exp_avg(size_t i) const;
  const Tensor& exp_avg_sq(size_t i) const;

  // Restores a checkpointed state: the step count and one (exp_avg, exp_avg_sq) per parameter,
  // in params() order, each shaped like its parameter (copied, converted to the state dtype: a
  // bf16 checkpoint's moments into bf16 state are its bits).
  // Throws naming the parameter FQN on a count or shape mismatch; on throw nothing changes.
  void restore(int64_t step_count, const std::vector<Tensor>& exp_avg,
               const std::vector<Tensor>& exp_avg_sq);

 private:
  nn::ParameterList params_;
  AdamWConfig cfg_;
  std::vector<Tensor> exp_avg_;
  std::vector<Tensor> exp_avg_sq_;
  int64_t step_count_ = 0;
};

}  // namespace titan::train
