// A MoE layer's routing statistics over a training step, and the aux loss's gradient onto the
// router logits. The forward adds one micro-batch's routing into running totals (the decoder's
// RouterTotals and the router's expert load); the aux loss (nn/decoder.cpp) is computed from
// those totals, and its gradient in each expert's probability sum, dprob_sums_E, is the same for
// every token, so the backward is the softmax's backward with that one upstream row.
// Shapes: N tokens, E experts.
//   counts_E       i64 [E]: (token, k) pairs routed to each expert this micro-batch (moe_router)
//   probs_NE       f32 [N, E]: softmax(logits_NE) over E (moe_router)
//   load_E         i64 [E]: load_E[j] += counts_E[j]                               (+=)
//   count_sums_E   f64 [E]: count_sums_E[j] += double(counts_E[j])                 (+=)
//   prob_sums_E    f64 [E]: prob_sums_E[j] += probs_NE[t, j], t = 0, 1, ... N - 1  (+=, in
//                  token order: each sum is one fp64 chain, so any split over experts keeps it)
//   count_sums_E and prob_sums_E are the aux-loss totals: both defined, or both undefined (bias
//   balancing or none keeps only the load), and then probs_NE is not read.
//   backward:      dlogits_NE[t, j] = f32(p_tj * (dprob_sums_E[j] - sum_i p_ti dprob_sums_E[i]))
//                  with p = probs_NE, the sum in fp64 in expert order              (written =)
// All contiguous, one device. The totals stay fp64 (host accumulators in the decoder).
#pragma once

#include <cstddef>
#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Each throws naming the tensor, what it expected and what it found.
void check_moe_load(const Tensor& counts_E, const Tensor& probs_NE, const Tensor& load_E, const Tensor& count_sums_E,
                    const Tensor& prob_sums_E);
void check_moe_load_backward(const Tensor& probs_NE, const Tensor& dprob_sums_E, const Tensor& dlogits_NE);

void moe_load_forward(const Tensor& counts_E, const Tensor& probs_NE, Tensor& load_E, Tensor& count_sums_E,
                      Tensor& prob_sums_E);
void moe_load_backward(const Tensor& probs_NE, const Tensor& dprob_sums_E, Tensor& dlogits_NE);

using MoeLoadImpl =
    OpImpl<bool (*)(const Tensor& counts_E, const Tensor& probs_NE),
           void (*)(const Tensor& counts_E, const Tensor& probs_NE, Tensor& load_E, Tensor& count_sums_E,
                    Tensor& prob_sums_E),
           void (*)(const Tensor& probs_NE, const Tensor& dprob_sums_E, Tensor& dlogits_NE)>;
OpTable<MoeLoadImpl>& moe_load_table();
MoeLoadImpl moe_load_impl_ref();
MoeLoadImpl moe_load_impl_cpu();

namespace ref {
// Scalar references over raw row-major arrays; P is the probabilities' type (float in training,
// double in the finite-difference check, which differentiates prob_sums through a softmax).
template <class P>
void moe_load_prob_sums(int64_t n, int64_t e, const P* probs, double* prob_sums);
template <class P, class D>
void moe_load_backward(int64_t n, int64_t e, const P* probs, const double* dprob_sums, D* dlogits);
}  // namespace ref

}  // namespace titan::ops
