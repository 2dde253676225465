#include "titan/train/optimizer.h"

#include "titan/core/error.h"
#include "titan/ops/adamw/adamw.h"

namespace titan::train {

AdamW::AdamW(nn::ParameterList params, AdamWConfig cfg) : params_(std::move(params)), cfg_(cfg) {
  TITAN_CHECK(cfg_.beta1 >= 0.0 && cfg_.beta1 < 1.0 && cfg_.beta2 >= 0.0 && cfg_.beta2 < 1.0,
              "[adamw] betas: expected each in [0, 1), got (", cfg_.beta1, ", ", cfg_.beta2,
              "). HINT: set optimizer.beta1/beta2 below 1");
  TITAN_CHECK(cfg_.state_dtype == DType::f32 || cfg_.state_dtype == DType::bf16, "[adamw] state dtype ",
              dtype_name(cfg_.state_dtype), ": expected f32 or bf16");
  TITAN_CHECK(cfg_.eps >= 0.0 && cfg_.weight_decay >= 0.0,
              "[adamw] eps, weight_decay: expected >= 0, got eps=", cfg_.eps,
              " weight_decay=", cfg_.weight_decay);
  exp_avg_.reserve(params_.size());
  exp_avg_sq_.reserve(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    const nn::Parameter* p = params_[i];
    TITAN_CHECK(p != nullptr && p->defined(), "[adamw] parameter ", i,
                ": undefined. HINT: ", "build the model before the optimizer");
    TITAN_CHECK(p->value.dtype() == DType::f32 && p->value.is_contiguous(), "[adamw] ", p->fqn,
                ": expected a contiguous f32 value, got ", p->value.describe());
    TITAN_CHECK(p->grad.defined() && p->grad.shape() == p->value.shape(), "[adamw] ", p->fqn,
                ".grad: expected f32", shape_str(p->value.shape()), ", got ",
                p->grad.defined() ? p->grad.describe() : std::string("undefined"));
    exp_avg_.push_back(Tensor::zeros(p->value.shape(), cfg_.state_dtype, p->value.device()));
    exp_avg_sq_.push_back(Tensor::zeros(p->value.shape(), cfg_.state_dtype, p->value.device()));
  }
}

void AdamW::step(double lr) {
  ++step_count_;
  ops::AdamWArgs args;
  args.lr = lr;
  args.beta1 = cfg_.beta1;
  args.beta2 = cfg_.beta2;
  args.eps = cfg_.eps;
  args.weight_decay = cfg_.weight_decay;
  args.step = step_count_;
  for (size_t i = 0; i < params_.size(); ++i) {
    ops::adamw_step(params_[i]->value, params_[i]->grad, exp_avg_[i], exp_avg_sq_[i], args);
  }
}

const Tensor& AdamW::exp_avg(size_t i) const {
  TITAN_CHECK(i < exp_avg_.size(), "[adamw] exp_avg(", i, "): only ", exp_avg_.size(),
              " parameters");
  return exp_avg_[i];
}

const Tensor& AdamW::exp_avg_sq(size_t i) const {
  TITAN_CHECK(i < exp_avg_sq_.size(), "[adamw] exp_avg_sq(", i, "): only ", exp_avg_sq_.size(),
              " parameters");
  return exp_avg_sq_[i];
}

void AdamW::restore(int64_t step_count, const std::vector<Tensor>& exp_avg,
                    const std::vector<Tensor>& exp_avg_sq) {
  TITAN_CHECK(step_count >= 0, "[adamw] restore: step count must be >= 0, got ", step_count);
  TITAN_CHECK(exp_avg.size() == params_.size() && exp_avg_sq.size() == params_.size(),
              "[adamw] restore: expected ", params_.size(), " exp_avg and exp_avg_sq tensors, got ",
              exp_avg.size(), " and ", exp_avg_sq.size(),
              ". HINT: the checkpoint was saved from a different model");
  // Validate everything before changing anything.
  for (size_t i = 0; i < params_.size(); ++i) {
    const Shape& want = params_[i]->value.shape();
    for (const Tensor* t : {&exp_avg[i], &exp_avg_sq[i]}) {
      TITAN_CHECK(t->defined() && t->shape() == want, "[adamw] restore ", params_[i]->fqn, " ",
                  t == &exp_avg[i] ? "exp_avg" : "exp_avg_sq", ": expected shape ", shape_str(want),
                  ", got ", t->defined() ? t->describe() : std::string("undefined"));
    }
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    exp_avg_[i].copy_from(exp_avg[i]);
    exp_avg_sq_[i].copy_from(exp_avg_sq[i]);
  }
  step_count_ = step_count;
}

void AdamW::restore(int64_t step_count, const std::vector<std::vector<Tensor>>& states) {
  TITAN_CHECK(states.size() == params_.size(), "[adamw] restore: expected the state of ", params_.size(),
              " parameters, got ", states.size(), ". HINT: the checkpoint was saved from a different model");
  std::vector<Tensor> m, v;
  for (size_t i = 0; i < states.size(); ++i) {
    TITAN_CHECK(states[i].size() == 2, "[adamw] restore ", params_[i]->fqn, ": expected exp_avg and exp_avg_sq, got ",
                states[i].size(), " tensors");
    m.push_back(states[i][0]);
    v.push_back(states[i][1]);
  }
  restore(step_count, m, v);
}

}  // namespace titan::train
