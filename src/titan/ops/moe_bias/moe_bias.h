// torchtitan's load-balancing step for a MoE router's expert bias (aux-loss-free balancing):
// after an optimizer step, experts that got fewer tokens than the mean have their bias raised and
// busier ones lowered, by a fixed rate, with the mean change removed so the biases do not drift.
// Shapes: E experts.
//   load_E  i64 [E]: tokens routed to each expert since the last update (the router's load)
//   bias_E  f32 [E]: bias_E[j] += f32(delta_j - mean_i delta_i)                       (+=)
//   where   mean     = (sum_j double(load_E[j])) / E                 (fp64, in expert order)
//           delta_j  = rate * sign(mean - load_E[j])                 (sign 0 at a tie)
//           mean_i delta_i = sum_i (delta_i / E)                     (fp64, in expert order)
// Every implementation computes these E values in this order, so all give the same bits. The bias
// is a buffer, not trained: the op has a forward only (the Impl's backward slot is
// std::nullptr_t).
#pragma once

#include <cstddef>
#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Throws naming the tensor, what it expected and what it found.
void check_moe_bias_update(const Tensor& load_E, const Tensor& bias_E);

void moe_bias_update(const Tensor& load_E, double rate, Tensor& bias_E);

using MoeBiasUpdateImpl = OpImpl<bool (*)(const Tensor& load_E, const Tensor& bias_E),
                                 void (*)(const Tensor& load_E, double rate, Tensor& bias_E), std::nullptr_t>;
OpTable<MoeBiasUpdateImpl>& moe_bias_update_table();
MoeBiasUpdateImpl moe_bias_update_impl_ref();
MoeBiasUpdateImpl moe_bias_update_impl_cpu();

}  // namespace titan::ops
