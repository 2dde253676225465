// SwiGLU feed-forward: y_ND = w2(silu(w1 x + b1) * (w3 x + b3)) + b2 (biases only with `bias`). w1 = gate, w3 = up, w2 = down
// (torchtitan names). Legend: N tokens, D dim, F hidden dim.
#pragma once

#include "titan/nn/linear.h"

namespace titan::nn {

struct FeedForwardConfig {
  int64_t dim = 0;
  int64_t hidden_dim = 0;
  bool bias = false;  // gate/up/down biases (HF Llama mlp_bias)
};

class FeedForward {
 public:
  FeedForward(const FeedForwardConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& x_ND);
  Tensor backward(const Tensor& dy_ND);  // returns dx_ND
  void collect(ParameterList& out);
  void release();

  Linear w1, w2, w3;

 private:
  FeedForwardConfig config_;
  Tensor gate_NF_, up_NF_;
};

}  // namespace titan::nn
