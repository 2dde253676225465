// Slices of a tensor along one dimension, as tensor parallelism cuts its parameters. The dimension
// is made of sections (sizes summing to it; one section when none are given), each split evenly
// over `degree` ranks; slice `rank` is its part of every section, in order. One section is the plain
// Megatron split (rank r's rows follow rank r - 1's); a fused projection is several: the gated
// DeltaNet's in_proj_qkv is [q | k | v], and each rank holds some heads of each.
#pragma once

#include <cstdint>
#include <vector>

#include "titan/core/tensor.h"

namespace titan {

// Whether `sections` (empty: one of `size`) are positive, sum to `size` and each divide by `degree`.
bool sections_divide(int64_t size, const std::vector<int64_t>& sections, int64_t degree);

// The indices along a dimension of `size` that slice `rank` of `degree` holds, in the slice's order.
// Throws when the sections do not divide (sections_divide) or rank is not in [0, degree).
std::vector<int64_t> slice_indices(int64_t size, const std::vector<int64_t>& sections, int64_t rank, int64_t degree);

// t's entries at `indices` along `dim`, as a new contiguous tensor of t's dtype.
Tensor take_along(const Tensor& t, int dim, const std::vector<int64_t>& indices);

// The reverse: src (shaped like take_along's result) written into `dst` (contiguous) at `indices`
// along `dim`, converting float dtypes.
void put_along(Tensor& dst, int dim, const std::vector<int64_t>& indices, const Tensor& src);

}  // namespace titan
