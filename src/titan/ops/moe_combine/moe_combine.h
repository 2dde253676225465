// MoE combine: each token's expert outputs summed with its routing weights, the last of the MoE
// block's four ops (router -> dispatch -> experts -> combine):
//   out_ND[n] = sum_k weight_NK[n, k] * y_PD[row_of_pair_NK[n, k]],  k ascending
// Unweighted (weight_NK undefined): out_ND[n] = sum_k y_PD[row_of_pair_NK[n, k]].
// Shape legend: N tokens, D model width, K top_k, P = N*K dispatch rows (moe_dispatch.h).
//   f32 and contiguous; row_of_pair i32.
// Backward: dy_PD[row_of_pair[n, k]] = weight[n, k] * dout_ND[n] and
//   dweight_NK[n, k] = dout_ND[n] . y_PD[row_of_pair[n, k]]; unweighted, dy_PD rows = dout_ND
//   rows (a gather) and no dweight: the MoE block takes this form and lets the experts' backward
//   apply the weights (moe_experts.h).
// Accumulation: out_ND, dy_PD and dweight_NK are written (=).
// Derivation: moe_combine.md.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Throws naming the tensor and the expected shape. weight_NK may be undefined (unweighted).
void check_moe_combine(const Tensor& y_PD, const Tensor& weight_NK, const Tensor& row_of_pair_NK);

void moe_combine_forward(const Tensor& y_PD, const Tensor& weight_NK,
                         const Tensor& row_of_pair_NK, Tensor& out_ND);
// Weighted: y_PD and dweight_NK as in the header comment. Unweighted: weight_NK, y_PD and
// dweight_NK are undefined (Tensor{}).
void moe_combine_backward(const Tensor& dout_ND, const Tensor& y_PD, const Tensor& weight_NK,
                          const Tensor& row_of_pair_NK, Tensor& dy_PD, Tensor& dweight_NK);

using MoeCombineImpl = OpImpl<
    bool (*)(const Tensor& weight_NK, const Tensor& row_of_pair_NK),
    void (*)(const Tensor&, const Tensor&, const Tensor&, Tensor&),
    void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&)>;
OpTable<MoeCombineImpl>& moe_combine_table();
MoeCombineImpl moe_combine_impl_ref();
MoeCombineImpl moe_combine_impl_cpu();

namespace ref {
// Scalar reference over raw row-major arrays, sums in double; instantiated for float and double
// (the double instance is what the finite-difference check differentiates). weight null:
// unweighted (then y and dweight are not read or written in backward).
template <class T>
void moe_combine_forward(int64_t n, int64_t d, int64_t top_k, const T* y, const T* weight,
                         const int32_t* row_of_pair, T* out);
template <class T>
void moe_combine_backward(int64_t n, int64_t d, int64_t top_k, const T* dout, const T* y,
                          const T* weight, const int32_t* row_of_pair, T* dy, T* dweight);
}  // namespace ref

}  // namespace titan::ops
