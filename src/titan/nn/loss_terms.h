// What a model's forward returns and reports, in terms the trainer can handle without knowing the
// model: named loss terms, and named per-step metrics.
//
// A loss term is a raw sum this rank holds (over its micro-batch) and the rule that turns the step's
// sum into its value. The trainer applies one rule to every term (train/trainer.h run_step):
//   value_i = global_sum(sum_i) / (the step's target tokens | the step's forwards)   (denominator_i)
//   loss    = sum over i of weight_i * value_i
// and forward_backward differentiates the same loss: a per-target term's sum scaled by grad_scale
// (1 / the step's targets), a per-forward term's by weight_i * forward_scale (1 / the step's
// forwards). A decoder returns "ce" (cross-entropy, per target, weight 1) and, with HF aux-loss
// balancing, "aux_loss" (per forward, weight router_aux_loss_coef); another loss (multi-token
// prediction, ...) is one more term, and the trainer needs no change for it.
// terms[0] is the model's own loss: what validation and perplexity report.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace titan::nn {

// What a term's global sum is divided by to give its value for the step.
enum class LossDenominator {
  targets,   // the step's target tokens, every rank's (a mean per target token)
  forwards,  // the step's forwards, every rank's and micro-batch's (a mean per forward)
};

struct LossTerm {
  std::string name;  // its metric name ("ce", "aux_loss")
  double sum = 0.0;  // this rank's raw sum (0 where this rank does not compute it: a pipeline's early stage)
  LossDenominator denominator = LossDenominator::targets;
  double weight = 1.0;  // its factor in the total loss
};

struct LossResult {
  // This call's loss: the per-target terms over num_targets plus each per-forward term (one forward)
  // times its weight, e.g. mean cross-entropy + router_aux_loss_coef * aux.
  double loss = 0.0;
  int64_t num_targets = 0;
  std::vector<LossTerm> terms;  // the model's terms, always all of them and in its order

  // The named term's sum; 0 when the model has no such term.
  double sum(std::string_view name) const;
  // Adds each of `other`'s sums to the same term of this one (the same model's terms), and its
  // targets; `other` may hold no terms (a pipeline stage that computes no loss).
  void add(const LossResult& other);
  // The loss of these sums over `forwards` forwards: sum over i of weight_i * sum_i / (num_targets
  // or forwards); a per-target term is 0 without targets.
  double mean(int64_t forwards) const;
};

// A term's value for a whole step (its global sum over its denominator).
struct LossValue {
  std::string name;
  double value = 0.0;
};

// A value a model reports for a step besides its loss (e.g. the expert load of an MoE), for the
// trainer's metric writers, which know no model feature and write these as given.
struct StepMetric {
  std::string name;  // the metrics.jsonl field
  std::variant<int64_t, double, std::vector<int64_t>> value;
  std::string tensorboard;  // its TensorBoard scalar's tag; empty: none (a list never has one)
  std::string console;      // its text on the console line, appended as is ("  expert_load: 58..71")
};

}  // namespace titan::nn
