// Elementwise passes over whole parameter / gradient buffers: where two gradient paths meet
// (residuals, q/k/v inputs), FSDP's shard-gradient accumulation, and grad-norm clipping
// (train/clip.cpp scales; its norm is ops/multi_tensor's multi_sum_squares, built on this
// order). Ops so that a device backend can replace the host loops behind the registry.
// Shapes: N flat elements, any rank (only numel matters); f32, contiguous, one device.
//   accumulate:  a_N += b_N                       (same numel; b is a, or does not overlap it)
//   scale:       a_N *= s
//   cast:        dst_N = src_N converted (f32 -> bf16 rounds to nearest even, NaN kept quiet;
//                bf16 -> f32 is exact); the bf16 compute path's casts
//   sum_squares: sum_i double(x_N[i])^2 in fp64, with 8 accumulators: element i goes into
//                acc[i % 8] (in index order), and the result is
//                ((acc0 + acc4) + (acc1 + acc5)) + ((acc2 + acc6) + (acc3 + acc7)).
// cast is the one op here that takes bf16 (one side f32, the other bf16).
// Accumulation: accumulate adds into a (+=, the parameter-gradient rule); scale overwrites a in
// place; sum_squares only reads x.
// Exactness (why every implementation gives the same bits): accumulate and scale are one IEEE f32
// operation per element; the square of an f32 is exact in fp64 (24 + 24 bits < 53), so the sum
// depends only on the fixed order above, with or without FMA contraction.
// sum_squares is not split over threads: its order is the contract. A caller with a large tensor
// cuts it into fixed chunks itself (multi_sum_squares: 64K elements) and sums the partials in order,
// so the result does not depend on the thread count.
// These passes are never differentiated, so the ops have a forward only (the Impl's backward slot
// is std::nullptr_t).
#pragma once

#include <cstddef>
#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Each throws naming the tensor, what it expected and what it found.
void check_accumulate(const Tensor& a, const Tensor& b);
void check_scale(const Tensor& a);
void check_sum_squares(const Tensor& x);
void check_cast(const Tensor& src, const Tensor& dst);

void accumulate(Tensor& a, const Tensor& b);  // a += b
void scale(Tensor& a, float s);               // a *= s
double sum_squares(const Tensor& x);          // fp64, in the order above
void cast(const Tensor& src, Tensor& dst);    // dst = src in dst's dtype
// x in `dtype` (f32 or bf16): x itself when it already is, else a new contiguous tensor.
Tensor cast_to(const Tensor& x, DType dtype);

using AccumulateImpl = OpImpl<bool (*)(const Tensor& a, const Tensor& b),
                              void (*)(Tensor& a, const Tensor& b), std::nullptr_t>;
using ScaleImpl = OpImpl<bool (*)(const Tensor& a), void (*)(Tensor& a, float s), std::nullptr_t>;
using CastImpl = OpImpl<bool (*)(const Tensor& src, const Tensor& dst),
                        void (*)(const Tensor& src, Tensor& dst), std::nullptr_t>;
using SumSquaresImpl =
    OpImpl<bool (*)(const Tensor& x), double (*)(const Tensor& x), std::nullptr_t>;

OpTable<AccumulateImpl>& accumulate_table();
OpTable<ScaleImpl>& scale_table();
OpTable<SumSquaresImpl>& sum_squares_table();
OpTable<CastImpl>& cast_table();
AccumulateImpl accumulate_impl_ref();
AccumulateImpl accumulate_impl_cpu();
ScaleImpl scale_impl_ref();
ScaleImpl scale_impl_cpu();
SumSquaresImpl sum_squares_impl_ref();
SumSquaresImpl sum_squares_impl_cpu();
CastImpl cast_impl_ref();
CastImpl cast_impl_cpu();

namespace ref {
// Scalar references over n flat elements: one plain loop each.
void accumulate(int64_t n, float* a, const float* b);
void scale(int64_t n, float* a, float s);
double sum_squares(int64_t n, const float* x);
}  // namespace ref

}  // namespace titan::ops
