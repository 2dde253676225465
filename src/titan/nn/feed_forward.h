// SwiGLU feed-forward: y_ND = w2(silu(w1 x + b1) * (w3 x + b3)) + b2 (biases only with `bias`). w1 = gate, w3 = up, w2 = down
// (torchtitan names). Legend: N tokens, D dim, F hidden dim.
#pragma once

#include <any>

#include "titan/nn/config_tree.h"
#include "titan/nn/linear.h"
#include "titan/nn/module_slots.h"

namespace titan::nn {

struct FeedForwardConfig {
  int64_t dim = 0;
  int64_t hidden_dim = 0;
  bool bias = false;  // gate/up/down biases (HF Llama mlp_bias)
};

// The node at model.layers.<i>.feed_forward (dense layers): a replaceable slot.
class FeedForwardNode : public NodeConfig {
 public:
  FeedForwardConfig config;
  std::vector<std::string> type_chain() const override { return {"FeedForward"}; }
};

// What a feed-forward module is to its block. Parameters keep the built-in FQNs
// (<fqn>.w1.weight, .w2.weight, .w3.weight, and biases), whatever the module's own layout.
// What forward keeps for backward is a value of the module's own type, held in `saved` (a
// std::any): the module itself holds no activations, so several micro-batches can be in flight.
class FeedForwardModule {
 public:
  virtual ~FeedForwardModule() = default;
  virtual Tensor forward(const Tensor& x_ND, std::any& saved) const = 0;
  // Returns dx_ND; parameter grads +=; consumes `saved`.
  virtual Tensor backward(const Tensor& dy_ND, std::any& saved) = 0;
  virtual void collect(ParameterList& out) = 0;  // w1, w2, w3 (weights, then biases), in that order
  // Selective activation checkpointing: drop from `saved` what is cheap to rebuild from the
  // module's input x_ND, and rebuild it (bit for bit). The default keeps everything.
  virtual void drop_recomputable(std::any& saved) const;
  virtual void recompute(const Tensor& x_ND, std::any& saved) const;
  // Throws a one-line error for micro-batches this module cannot run; called once before step 1.
  virtual void check(int64_t batch, int64_t seq) const;
  virtual std::string describe() const = 0;
};

class FeedForward : public FeedForwardModule {
 public:
  struct Saved {
    Linear::Saved w1, w3, w2;  // w1 and w3 keep x, w2 the SwiGLU output
    Tensor gate_NF, up_NF;     // the w1 and w3 outputs
  };

  FeedForward(const FeedForwardConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& x_ND, std::any& saved) const override;
  Tensor backward(const Tensor& dy_ND, std::any& saved) override;
  void collect(ParameterList& out) override;
  // Drops x and the SwiGLU output; keeps gate and up (the GEMM outputs).
  void drop_recomputable(std::any& saved) const override;
  void recompute(const Tensor& x_ND, std::any& saved) const override;
  std::string describe() const override { return "feed_forward (built-in)"; }

  Linear w1, w2, w3;

 private:
  FeedForwardConfig config_;
};

// The feed-forward slot: "FeedForward" builds the built-in module.
ModuleSlot<FeedForwardModule, FeedForwardNode>& feed_forward_slot();

}  // namespace titan::nn
