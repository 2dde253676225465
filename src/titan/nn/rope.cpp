#include "titan/nn/rope.h"

namespace titan::nn {

void RopeModule::check_heads(int64_t, int64_t, int64_t, int64_t) const {}

void Rope::forward(const StepContext& ctx, Tensor& x_BTHK) { ops::rope_forward(ctx.rope, x_BTHK, x_BTHK); }
void Rope::backward(const StepContext& ctx, Tensor& dx_BTHK) { ops::rope_backward(ctx.rope, dx_BTHK, dx_BTHK); }

}  // namespace titan::nn
