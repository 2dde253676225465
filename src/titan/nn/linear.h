// Linear: y_NO = x_NI w_OI^T (+ b_O). Saves x for the weight gradient.
#pragma once

#include "titan/nn/parameter.h"

namespace titan::nn {

struct LinearConfig {
  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = false;
};

class Linear {
 public:
  Linear(const LinearConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& x_NI);
  // Returns dx_NI (undefined when !need_dx); accumulates weight/bias grads.
  Tensor backward(const Tensor& dy_NO, bool need_dx = true);
  void collect(ParameterList& out);
  void release() { x_NI_ = Tensor(); }

  const LinearConfig& config() const { return config_; }
  Parameter weight;  // [out, in]
  Parameter bias;    // [out] or undefined

 private:
  LinearConfig config_;
  Tensor x_NI_;
};

}  // namespace titan::nn
