// MoE dispatch: the (token, k) pairs sorted by expert, and the token rows gathered in that order,
// the second of the MoE block's four ops (router -> dispatch -> experts -> combine). Expert
// parallelism puts its all-to-all between this op and the experts.
//   x_PD[r] = x_ND[pair_of_row_P[r] / K]
// Layout (part of the contract, written by every implementation): the P pairs sorted stably by
//   expert, so expert e owns the dispatch rows [offsets_E1[e], offsets_E1[e+1]) and within it the
//   pairs keep (token, k) ascending order. row_of_pair_NK maps a pair to its row, pair_of_row_P
//   back (pair index n*K + k).
// Shape legend: N tokens, D model width, E experts, K top_k, P = N*K pairs. x f32 and contiguous;
//   expert_NK i32 (the router's), offsets i64, row_of_pair and pair_of_row i32.
// Backward: dx_ND[n] += sum_k dx_PD[row_of_pair[n, k]], k ascending.
// Accumulation: dx_ND is accumulated (+=): the block adds the experts' part to the router's dx.
// Derivation: moe_dispatch.md.
#pragma once

#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct MoeDispatchArgs {
  int64_t num_experts = 1;
};

// The dispatch layout, (re)allocated by forward; backward, the experts and combine read it.
struct MoeLayout {
  Tensor offsets_E1;      // i64 [E + 1] first dispatch row of each expert
  Tensor row_of_pair_NK;  // i32 dispatch row of pair (n, k)
  Tensor pair_of_row_P;   // i32 pair index n*K + k of each dispatch row
};

// Throws naming the tensor and the expected shape, or the bad argument.
void check_moe_dispatch(const MoeDispatchArgs& args, const Tensor& x_ND, const Tensor& expert_NK);

// x_PD is written; layout is (re)allocated. Experts outside [0, E) are the caller's bug (the
// router writes them): not checked per pair.
void moe_dispatch_forward(const MoeDispatchArgs& args, const Tensor& x_ND, const Tensor& expert_NK,
                          Tensor& x_PD, MoeLayout& layout);
void moe_dispatch_backward(const MoeDispatchArgs& args, const Tensor& dx_PD,
                           const MoeLayout& layout, Tensor& dx_ND);

using MoeDispatchImpl = OpImpl<
    bool (*)(const MoeDispatchArgs&, const Tensor& x_ND, const Tensor& expert_NK),
    void (*)(const MoeDispatchArgs&, const Tensor&, const Tensor&, Tensor&, MoeLayout&),
    void (*)(const MoeDispatchArgs&, const Tensor&, const MoeLayout&, Tensor&)>;
OpTable<MoeDispatchImpl>& moe_dispatch_table();
MoeDispatchImpl moe_dispatch_impl_ref();
MoeDispatchImpl moe_dispatch_impl_cpu();
MoeDispatchImpl moe_dispatch_impl_meta();  // the CPU kernel's allocations, no values

namespace ref {
// Scalar reference over raw row-major arrays; instantiated for float and double (the double
// instance is what the finite-difference check differentiates). Backward adds to dx.
template <class T>
void moe_dispatch_forward(int64_t n, int64_t d, int64_t e, int64_t top_k, const T* x,
                          const int32_t* expert, T* x_rows, int64_t* offsets,
                          int32_t* row_of_pair, int32_t* pair_of_row);
template <class T>
void moe_dispatch_backward(int64_t n, int64_t d, int64_t top_k, const T* dx_rows,
                           const int32_t* row_of_pair, T* dx);
}  // namespace ref

}  // namespace titan::ops
