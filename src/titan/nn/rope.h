// Rotary position embedding as a replaceable module (the slot every attention layer has at
// "model.layers.<i>.attention.rope"). The built-in module applies the rope op (ops/rope); a
// plugin registers another module type for a RopeConfig-derived node (rope_module_factories) and
// an override puts that node into the tree. Legend: B batch, T sequence, H heads, K head_dim.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "titan/nn/config_tree.h"
#include "titan/nn/context.h"
#include "titan/nn/module_slots.h"

namespace titan::nn {

// What every RoPE node carries. Derived node types add their own fields.
class RopeConfig : public NodeConfig {
 public:
  float theta = 1e6f;
  int64_t head_dim = 0;
  std::vector<std::string> type_chain() const override { return {"Rope"}; }
};

class RopeModule {
 public:
  virtual ~RopeModule() = default;
  // x_BTHK (q or k, contiguous f32 [B, T, H, K]) rotated in place; backward rotates the gradient
  // back (the transpose).
  virtual void forward(const StepContext& ctx, Tensor& x_BTHK) = 0;
  virtual void backward(const StepContext& ctx, Tensor& dx_BTHK) = 0;
  // Throws a one-line error when the module cannot run these shapes; called once before step 1.
  virtual void check(int64_t batch, int64_t seq, int64_t heads, int64_t head_dim) const;
  // For the startup log: "rope (built-in)", "rope_tiled (plugin rope_tiled.so)".
  virtual std::string describe() const = 0;
};

// The built-in module: ops::rope_forward / rope_backward over the step's shared tables.
class Rope : public RopeModule {
 public:
  void forward(const StepContext& ctx, Tensor& x_BTHK) override;
  void backward(const StepContext& ctx, Tensor& dx_BTHK) override;
  std::string describe() const override { return "rope (built-in)"; }
};

// The RoPE slot (model.layers.<i>.attention.rope): "Rope" builds the built-in module.
ModuleSlot<RopeModule, RopeConfig>& rope_slot();

}  // namespace titan::nn
