// Local ids of a vocabulary-parallel embedding: each rank holds the rows [start, start + size)
// of the table, so an id is looked up at id - start when it falls there and is marked outside
// otherwise (its row is zeroed by rows_mask after the lookup of row 0, and its gradient dropped
// by the same mask; nn/embedding.cpp).
// Shapes: N ids (any shape, read flat).
//   ids_N      i64, contiguous
//   local_N    i64, contiguous, N elements: written (=) id - start inside, 0 outside
//   outside_N  i32 [N], contiguous: written (=) 1 outside, 0 inside
// Integer arithmetic: every implementation gives the same values. No gradient (integers), so
// the op has a forward only (the Impl's backward slot is std::nullptr_t).
#pragma once

#include <cstddef>
#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct LocalIdsArgs {
  int64_t start = 0;  // the first id this rank holds
  int64_t size = 0;   // how many it holds (the local table's rows)
};

// Throws naming the tensor, what it expected and what it found.
void check_local_ids(const LocalIdsArgs& args, const Tensor& ids_N, const Tensor& local_N, const Tensor& outside_N);

void local_ids_forward(const LocalIdsArgs& args, const Tensor& ids_N, Tensor& local_N, Tensor& outside_N);

using LocalIdsImpl =
    OpImpl<bool (*)(const LocalIdsArgs&, const Tensor& ids_N),
           void (*)(const LocalIdsArgs&, const Tensor& ids_N, Tensor& local_N, Tensor& outside_N), std::nullptr_t>;
OpTable<LocalIdsImpl>& local_ids_table();
LocalIdsImpl local_ids_impl_ref();
LocalIdsImpl local_ids_impl_cpu();

}  // namespace titan::ops
