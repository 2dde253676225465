// Rotary position embedding: the Rope node kind (model.layers.<i>.attention.rope). The built-in
// module applies the rope op (ops/rope) with the step's shared tables; a plugin registers another
// module type for a RopeConfig-derived node and an override puts that node into the tree.
// Legend: B batch, T sequence, H heads, K head_dim.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "titan/nn/context.h"
#include "titan/nn/module.h"

namespace titan::nn {

// What every RoPE node carries. Derived node types add their own fields.
class RopeConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "Rope";
  std::vector<std::string> type_chain() const override { return {kType}; }

  float theta = 1e6f;
  int64_t head_dim = 0;
};

// RoPE keeps nothing for backward (the tables are the step's), so it works in place; forward and
// backward are not const so that a plugin may cache tables (keyed by shape, never by micro-batch).
class RopeModule : public Module {
 public:
  static constexpr const char* kKind = "Rope";
  // x_BTHK (q or k, contiguous f32 [B, T, H, K]) rotated in place; backward rotates the gradient
  // back (the transpose).
  virtual void forward(const StepContext& ctx, Tensor& x_BTHK) = 0;
  virtual void backward(const StepContext& ctx, Tensor& dx_BTHK) = 0;
  // Throws a one-line error when the module cannot run these shapes; called once before step 1
  // (for the query heads and for the kv heads).
  virtual void check_heads(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim) const;
  void collect(ParameterList&) override {}
};

// The built-in module: ops::rope_forward / rope_backward over the step's shared tables.
class Rope : public RopeModule {
 public:
  void forward(const StepContext& ctx, Tensor& x_BTHK) override;
  void backward(const StepContext& ctx, Tensor& dx_BTHK) override;
  std::string describe() const override { return "rope (built-in)"; }
};

}  // namespace titan::nn
