// SwiGLU feed-forward, the FeedForward node kind (model.layers.<i>.feed_forward, dense layers), its
// projections .w1 / .w2 / .w3 child nodes (Linear):
// y_ND = w2(silu(w1 x + b1) * (w3 x + b3)) + b2 (biases only with `bias`). w1 = gate, w3 = up, w2 = down
// (torchtitan names). Legend: N tokens, D dim, F hidden dim.
#pragma once

#include <any>

#include "titan/nn/linear.h"
#include "titan/nn/module.h"

namespace titan::nn {

class FeedForwardConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "FeedForward";
  FeedForwardConfig() = default;
  FeedForwardConfig(int64_t dim_, int64_t hidden_dim_, bool bias_) : dim(dim_), hidden_dim(hidden_dim_), bias(bias_) {}
  std::vector<std::string> type_chain() const override { return {kType}; }

  int64_t dim = 0;
  int64_t hidden_dim = 0;
  bool bias = false;  // gate/up/down biases (HF Llama mlp_bias)
};

// What a feed-forward module is to its block. Parameters keep the built-in FQNs
// (<fqn>.w1.weight, .w2.weight, .w3.weight, and biases), whatever the module's own layout.
// What forward keeps for backward is a value of the module's own type, held in `saved` (a
// std::any): the module itself holds no activations, so several micro-batches can be in flight.
class FeedForwardModule : public Module {
 public:
  static constexpr const char* kKind = "FeedForward";
  virtual Tensor forward(const Tensor& x_ND, std::any& saved) const = 0;
  // Returns dx_ND; parameter grads +=; consumes `saved`.
  virtual Tensor backward(const Tensor& dy_ND, std::any& saved) = 0;
  // Selective activation checkpointing: drop from `saved` what is cheap to rebuild from the
  // module's input x_ND, and rebuild it (bit for bit). The default keeps everything.
  virtual void drop_recomputable(std::any& saved) const;
  virtual void recompute(const Tensor& x_ND, std::any& saved) const;
};

class FeedForward : public FeedForwardModule {
 public:
  struct Saved {
    LinearModule::Saved w1, w3, w2;  // w1 and w3 keep x, w2 the SwiGLU output
    Tensor gate_NF, up_NF;     // the w1 and w3 outputs
  };

  // Builds its projections from the tree through `build`.
  FeedForward(const FeedForwardConfig& config, const ModuleBuild& build);

  Tensor forward(const Tensor& x_ND, std::any& saved) const override;
  Tensor backward(const Tensor& dy_ND, std::any& saved) override;
  void collect(ParameterList& out) override;  // w1, w2, w3 (weights, then biases), in that order
  // Drops x and the SwiGLU output; keeps gate and up (the GEMM outputs).
  void drop_recomputable(std::any& saved) const override;
  void recompute(const Tensor& x_ND, std::any& saved) const override;
  std::string describe() const override { return "feed_forward (built-in)"; }

  std::unique_ptr<LinearModule> w1, w2, w3;

 private:
  FeedForwardConfig config_;
};

}  // namespace titan::nn
