// The MoE's grouped experts, the Experts node kind (model.layers.<i>.moe.experts): each expert's
// SwiGLU over its dispatch rows, y_PD = w2[e](silu(w1[e] x) * (w3[e] x)), as grouped GEMMs (ops/
// moe_experts). Rows are the dispatch layout's (ops/moe_dispatch): expert e owns rows
// [offsets[e], offsets[e+1]); under expert parallelism these are the rows an all-to-all brought.
// Legend: P dispatch rows (token, k pairs), D dim, E experts, F expert hidden width, N tokens, K top_k.
#pragma once

#include <any>

#include "titan/nn/module.h"
#include "titan/ops/moe_experts/moe_experts.h"

namespace titan::nn {

class ExpertsConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "Experts";
  std::vector<std::string> type_chain() const override { return {kType}; }

  int64_t dim = 0;
  int64_t hidden_dim = 0;  // per expert
  int64_t num_experts = 0;
};

class ExpertsModule : public Module {
 public:
  static constexpr const char* kKind = "Experts";
  virtual Tensor forward(const Tensor& x_PD, const Tensor& offsets_E1, std::any& saved) const = 0;
  // The backward of the rows as the combine weighs them (row r scaled by weight_NK of its pair
  // pair_of_row_P[r]; ops/moe/moe.md says why the weights are applied here): dx_PD (written; it may
  // be dy_PD's buffer), dweight_NK (written), parameter grads (+=). x_PD: the forward's rows again.
  virtual void backward(const Tensor& dy_PD, const Tensor& weight_NK, const Tensor& pair_of_row_P,
                        const Tensor& x_PD, const Tensor& offsets_E1, std::any& saved, Tensor& dx_PD,
                        Tensor& dweight_NK) = 0;
  // Expert parallelism: keep experts [first, first + count) of every stacked weight (and a zeroed
  // gradient of that shape); the rest go. The default refuses, naming the module.
  virtual void keep_experts(int64_t first, int64_t count);
};

class Experts : public ExpertsModule {
 public:
  Experts(const ExpertsConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& x_PD, const Tensor& offsets_E1, std::any& saved) const override;
  void backward(const Tensor& dy_PD, const Tensor& weight_NK, const Tensor& pair_of_row_P, const Tensor& x_PD,
                const Tensor& offsets_E1, std::any& saved, Tensor& dx_PD, Tensor& dweight_NK) override;
  void collect(ParameterList& out) override;  // w1, w2, w3
  void keep_experts(int64_t first, int64_t count) override;
  std::string describe() const override { return "moe experts (built-in)"; }

  Parameter w1, w2, w3;  // gate [E, F, D], down [E, D, F], up [E, F, D]

 private:
  ExpertsConfig config_;
};

}  // namespace titan::nn
