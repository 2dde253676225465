// Linear: y_NO = x_NI w_OI^T (+ b_O), the Linear node kind. Attention's projections
// (model.layers.<i>.attention.wq / wk / wv / wo) and the dense feed-forward's (.feed_forward.w1 /
// w2 / w3) are nodes of the config tree, so an override can replace them: LoRA (nn/lora.h) is
// the in-tree user. Forward fills a Saved (its input, for the weight gradient) that backward
// consumes: the module holds parameters only, so any number of micro-batches can be in flight and
// a Saved can be dropped and rebuilt (activation checkpointing). A module of this kind must work
// from that one saved input: what else it needs in backward it recomputes from x.
#pragma once

#include "titan/nn/module.h"

namespace titan::nn {

class LinearConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "Linear";
  LinearConfig() = default;
  LinearConfig(int64_t in, int64_t out, bool bias_) : in_features(in), out_features(out), bias(bias_) {}
  std::vector<std::string> type_chain() const override { return {kType}; }

  int64_t in_features = 0;
  int64_t out_features = 0;
  bool bias = false;
};

// What a linear module is to its parent (attention, feed-forward). Parameters keep the built-in
// FQNs (<fqn>.weight, <fqn>.bias) whatever the module adds.
class LinearModule : public Module {
 public:
  static constexpr const char* kKind = "Linear";
  struct Saved {
    Tensor x_NI;  // in the module's compute dtype (bf16 on the bf16 path: half the memory)
  };
  // x_NI f32, or already in the compute dtype (callers feeding one input to several linears cast
  // it once: compute_input()). y_NO f32.
  virtual Tensor forward(const Tensor& x_NI, Saved& saved) const = 0;
  // Returns dx_NI (undefined when !need_dx); accumulates parameter grads; empties `saved`.
  virtual Tensor backward(const Tensor& dy_NO, Saved& saved, bool need_dx = true) = 0;
  // x_NI in the dtype forward computes with (itself when it already is).
  virtual Tensor compute_input(const Tensor& x_NI) const = 0;
  virtual DType compute_dtype() const = 0;
};

class Linear : public LinearModule {
 public:
  Linear(const LinearConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& x_NI, Saved& saved) const override;
  Tensor backward(const Tensor& dy_NO, Saved& saved, bool need_dx = true) override;
  Tensor compute_input(const Tensor& x_NI) const override;
  DType compute_dtype() const override { return weight.compute_dtype; }
  void collect(ParameterList& out) override;
  std::string describe() const override { return "linear (built-in)"; }

  const LinearConfig& config() const { return config_; }
  Parameter weight;  // [out, in]
  Parameter bias;    // [out] or undefined

 private:
  LinearConfig config_;
};

}  // namespace titan::nn
