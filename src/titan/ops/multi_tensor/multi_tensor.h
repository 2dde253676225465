// Passes over a list of tensors at once (the gradients of a model): grad-norm clipping's sum of
// squares and the non-finite scan (train/clip.cpp). Ops so that the loops over gradient data sit
// behind the registry, not in train/.
// Shapes: xs[t] is a flat tensor of N_t elements, any rank (only numel matters); f32, contiguous,
// all on one device. The list may be empty and a tensor may have no elements.
//   multi_sum_squares: each xs[t] is cut into chunks of kMultiSumSquaresChunk elements (the last
//     one shorter); each chunk's sum of squares follows the sum_squares contract
//     (elementwise.h: fp64, 8 accumulators, fixed tree), and the partials are added to a total
//     that starts at 0.0, in list order and, within a tensor, in chunk order:
//       total = 0; for t: for chunk k of xs[t]: total += sum_squares(chunk)
//   first_nonfinite: the index t of the first tensor (in list order) holding a NaN or an Inf,
//     or -1 when every element is finite.
// Determinism: the chunks are fixed, not per thread, so the sum is the same bits for any thread
// count and schedule; every implementation forms it in the order above (the squares are exact in
// fp64, so FMA contraction cannot change a bit either).
// Only reads xs. Never differentiated: forward only (the Impl's backward slot is std::nullptr_t).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Elements per partial sum of multi_sum_squares.
constexpr int64_t kMultiSumSquaresChunk = int64_t{1} << 16;

// Throws naming the list entry (xs[t]), what it expected and what it found.
void check_multi_tensor(const char* op, const std::vector<Tensor>& xs);

double multi_sum_squares(const std::vector<Tensor>& xs);  // fp64, in the order above
int64_t first_nonfinite(const std::vector<Tensor>& xs);   // tensor index, or -1

using MultiSumSquaresImpl = OpImpl<bool (*)(const std::vector<Tensor>& xs),
                                   double (*)(const std::vector<Tensor>& xs), std::nullptr_t>;
using FirstNonfiniteImpl = OpImpl<bool (*)(const std::vector<Tensor>& xs),
                                  int64_t (*)(const std::vector<Tensor>& xs), std::nullptr_t>;

OpTable<MultiSumSquaresImpl>& multi_sum_squares_table();
OpTable<FirstNonfiniteImpl>& first_nonfinite_table();
MultiSumSquaresImpl multi_sum_squares_impl_ref();
MultiSumSquaresImpl multi_sum_squares_impl_cpu();
FirstNonfiniteImpl first_nonfinite_impl_ref();
FirstNonfiniteImpl first_nonfinite_impl_cpu();

namespace ref {
// Scalar references over raw arrays: xs[t] has ns[t] elements. Plain loops.
double multi_sum_squares(const std::vector<const float*>& xs, const std::vector<int64_t>& ns);
int64_t first_nonfinite(const std::vector<const float*>& xs, const std::vector<int64_t>& ns);
}  // namespace ref

}  // namespace titan::ops
