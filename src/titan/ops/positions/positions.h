// Token positions: the RoPE position of every token of a [B, S] block, for training (each row
// starts at 0) and for decoding from a KV cache (each row's slots start at cache.length and its
// prompt at begin_B[b], after left padding). Also an iota (B = 1, start 0, no begin_B): the
// rows 0..S-1 a caller numbers (MoE expert parallelism's own-pair index).
// Shapes: B rows, S tokens per row.
//   begin_B  i64 [B], or undefined (every row begins at 0)
//   start    the slot of each row's first token in this block (cache.length; 0 in training)
//   pos_N    i64 or i32, contiguous, B * S elements (any shape): written (=)
//   pos_N[b * S + s] = max(0, start + s - begin_B[b])      (0 on left padding)
// With padding_mask, the left padding itself instead: pos_N[b * S + s] = 1 where start + s <
// begin_B[b], else 0 (ops/rows' rows_mask zeroes those rows: a recurrent layer's input, which
// padding must not reach).
// Integer arithmetic: every implementation gives the same values. No gradient (integers), so
// the op has a forward only (the Impl's backward slot is std::nullptr_t).
#pragma once

#include <cstddef>
#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct PositionsArgs {
  int64_t batch = 0;  // B
  int64_t seq = 0;    // S
  int64_t start = 0;  // the block's first slot
  bool padding_mask = false;  // write 1 on left padding, 0 on tokens, instead of positions
};

// Throws naming the tensor, what it expected and what it found.
void check_positions(const PositionsArgs& args, const Tensor& begin_B, const Tensor& pos_N);

void positions_forward(const PositionsArgs& args, const Tensor& begin_B, Tensor& pos_N);
// A new i64 [B * S] tensor of positions (the StepContext's positions_N).
Tensor make_positions(const PositionsArgs& args, const Tensor& begin_B = Tensor());

using PositionsImpl = OpImpl<bool (*)(const PositionsArgs&, const Tensor& begin_B, const Tensor& pos_N),
                             void (*)(const PositionsArgs&, const Tensor& begin_B, Tensor& pos_N), std::nullptr_t>;
OpTable<PositionsImpl>& positions_table();
PositionsImpl positions_impl_ref();
PositionsImpl positions_impl_cpu();

}  // namespace titan::ops
