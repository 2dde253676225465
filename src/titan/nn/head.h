// The output head and its loss, the Head node kind (model.output): logits = x w^T over the
// vocabulary, and the fused lm_head + cross-entropy that never holds [tokens, vocab] logits whole
// (ops/softmax_xent). The weight is the head's own, or the embedding table when tied.
// Legend: N tokens, D dim, V vocab.
#pragma once

#include "titan/nn/module.h"
#include "titan/ops/softmax_xent/softmax_xent.h"

namespace titan::nn {

class HeadConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "Head";
  HeadConfig() = default;
  HeadConfig(int64_t dim_, int64_t vocab_size_, bool tied_) : dim(dim_), vocab_size(vocab_size_), tied(tied_) {}
  std::vector<std::string> type_chain() const override { return {kType}; }

  int64_t dim = 0;
  int64_t vocab_size = 0;
  bool tied = false;  // the weight is the embedding table (tie() hands it over)
};

class HeadModule : public Module {
 public:
  static constexpr const char* kKind = "Head";
  // Mean-able cross-entropy of x_ND [N, D] against targets (N ids, -100 ignored): the loss sum and
  // target count. With dx_ND defined, dx_ND is written and the weight's gradient accumulated,
  // both scaled by grad_scale; undefined: forward only.
  virtual ops::LmHeadXentResult loss(const Tensor& x_ND, const Tensor& targets, float grad_scale, Tensor& dx_ND) = 0;
  virtual Tensor logits(const Tensor& x_ND) = 0;  // f32 [N, V]
  // The weight [V, D] (tensor parallelism's vocabulary-parallel head reads it).
  virtual Parameter& weight() = 0;
  // Tied embeddings: the decoder hands over the embedding table, which the head then uses.
  virtual void tie(Parameter& table) = 0;
};

class Head : public HeadModule {
 public:
  Head(const HeadConfig& config, const std::string& fqn);

  ops::LmHeadXentResult loss(const Tensor& x_ND, const Tensor& targets, float grad_scale, Tensor& dx_ND) override;
  Tensor logits(const Tensor& x_ND) override;
  Parameter& weight() override { return tied_ != nullptr ? *tied_ : own_; }
  void tie(Parameter& table) override { tied_ = &table; }
  // The tied table is the embedding's parameter, collected there.
  void collect(ParameterList& out) override;
  std::string describe() const override { return "head + cross-entropy (built-in)"; }

 private:
  HeadConfig config_;
  Parameter own_;               // [V, D] when not tied
  Parameter* tied_ = nullptr;   // the embedding table when tied
};

}  // namespace titan::nn
