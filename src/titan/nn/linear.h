// Linear: y_NO = x_NI w_OI^T (+ b_O). Forward fills a Saved (its input, for the weight gradient)
// that backward consumes: the module holds parameters only, so any number of micro-batches can be
// in flight and a Saved can be dropped and rebuilt (activation checkpointing).
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
  struct Saved {
    Tensor x_NI;  // in the weight's compute dtype (bf16 on the bf16 path: half the memory)
  };

  Linear(const LinearConfig& config, const std::string& fqn);

  // x_NI f32, or already in the compute dtype (callers feeding one input to several linears cast
  // it once: compute_input()). y_NO f32.
  Tensor forward(const Tensor& x_NI, Saved& saved) const;
  // x_NI in this linear's compute dtype (itself when it already is).
  Tensor compute_input(const Tensor& x_NI) const;
  // Returns dx_NI (undefined when !need_dx); accumulates weight/bias grads; empties `saved`.
  Tensor backward(const Tensor& dy_NO, Saved& saved, bool need_dx = true);
  void collect(ParameterList& out);

  const LinearConfig& config() const { return config_; }
  Parameter weight;  // [out, in]
  Parameter bias;    // [out] or undefined

 private:
  LinearConfig config_;
};

}  // namespace titan::nn
