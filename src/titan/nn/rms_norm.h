// RMSNorm over the last dim (fp32 statistics): the RmsNorm node kind (attention_norm, ffn_norm,
// q_norm / k_norm, the final norm). What forward keeps for backward is a value the caller holds
// (a std::any of the module's own Saved type), so the module holds parameters only.
#pragma once

#include <any>

#include "titan/nn/module.h"
#include "titan/ops/rms_norm/rms_norm.h"

namespace titan::nn {

class RmsNormConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "RmsNorm";
  RmsNormConfig() = default;
  RmsNormConfig(int64_t dim_, float eps_) : dim(dim_), eps(eps_) {}
  std::vector<std::string> type_chain() const override { return {kType}; }

  int64_t dim = 0;
  float eps = 1e-6f;
  // 1: the zero-centred norm (Qwen3.5, Gemma): x * (1 + w), w stored and initialised at 0.
  float weight_offset = 0.0f;
};

class RmsNormModule : public Module {
 public:
  static constexpr const char* kKind = "RmsNorm";
  // x may be [N, dim] or [N, H, dim] (per-head q/k norm): normalized over the last dim.
  virtual Tensor forward(const Tensor& x, std::any& saved) const = 0;
  // Returns dx (the shape of x); accumulates dweight; consumes `saved`.
  virtual Tensor backward(const Tensor& dy, std::any& saved) = 0;
};

class RmsNorm : public RmsNormModule {
 public:
  struct Saved {
    Tensor x;                 // the input
    ops::RmsNormSaved stats;  // rstd per row
  };

  RmsNorm(const RmsNormConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& x, std::any& saved) const override;
  Tensor backward(const Tensor& dy, std::any& saved) override;
  void collect(ParameterList& out) override { out.push_back(&weight); }
  std::string describe() const override { return "rms_norm (built-in)"; }

  Parameter weight;  // [dim]

 private:
  RmsNormConfig config_;
};

}  // namespace titan::nn
