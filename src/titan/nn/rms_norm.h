// RMSNorm module over the last dim (fp32 statistics). Saves x and rstd.
#pragma once

#include "titan/nn/parameter.h"
#include "titan/ops/rms_norm/rms_norm.h"

namespace titan::nn {

struct RmsNormConfig {
  int64_t dim = 0;
  float eps = 1e-6f;
};

class RmsNorm {
 public:
  RmsNorm(const RmsNormConfig& config, const std::string& fqn);

  // x may be [N, dim] or [N, H, dim] (per-head q/k norm): normalized over the last dim.
  Tensor forward(const Tensor& x);
  Tensor backward(const Tensor& dy);  // returns dx (same shape as x); accumulates dweight
  void collect(ParameterList& out) { out.push_back(&weight); }
  void release() { x_ = Tensor(); saved_ = {}; }

  Parameter weight;  // [dim]

 private:
  RmsNormConfig config_;
  Tensor x_;
  ops::RmsNormSaved saved_;
};

}  // namespace titan::nn
