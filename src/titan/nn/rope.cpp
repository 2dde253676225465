#include "titan/nn/rope.h"

#include "titan/core/error.h"

namespace titan::nn {

void RopeModule::check(int64_t, int64_t, int64_t, int64_t) const {}

void Rope::forward(const StepContext& ctx, Tensor& x_BTHK) { ops::rope_forward(ctx.rope, x_BTHK, x_BTHK); }
void Rope::backward(const StepContext& ctx, Tensor& dx_BTHK) { ops::rope_backward(ctx.rope, dx_BTHK, dx_BTHK); }

ModuleSlot<RopeModule, RopeConfig>& rope_slot() {
  static ModuleSlot<RopeModule, RopeConfig> slot(
      "RoPE", "Rope", [](const RopeConfig&, const std::string&) { return std::make_unique<Rope>(); });
  return slot;
}

}  // namespace titan::nn
