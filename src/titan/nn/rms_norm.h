// RMSNorm module over the last dim (fp32 statistics). Forward fills a Saved (x and rstd) that
// backward consumes.
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
  struct Saved {
    Tensor x;                   // the input, any shape ending in dim
    ops::RmsNormSaved stats;    // rstd per row
  };

  RmsNorm(const RmsNormConfig& config, const std::string& fqn);

  // x may be [N, dim] or [N, H, dim] (per-head q/k norm): normalized over the last dim.
  Tensor forward(const Tensor& x, Saved& saved) const;
  // Returns dx (same shape as x); accumulates dweight; empties `saved`.
  Tensor backward(const Tensor& dy, Saved& saved);
  void collect(ParameterList& out) { out.push_back(&weight); }

  Parameter weight;  // [dim]

 private:
  RmsNormConfig config_;
};

}  // namespace titan::nn
