// Contract checks, table and dispatch of positions.
#include "titan/ops/positions/positions.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

void check_positions(const PositionsArgs& args, const Tensor& begin_B, const Tensor& pos_N) {
  TITAN_CHECK(args.batch >= 0 && args.seq >= 0, "[positions] batch ", args.batch, ", seq ", args.seq,
              ": expected counts >= 0. HINT: pass the block's [B, S]");
  TITAN_CHECK(pos_N.defined() && pos_N.is_contiguous() && (pos_N.dtype() == DType::i64 || pos_N.dtype() == DType::i32) &&
                  pos_N.numel() == args.batch * args.seq,
              "[positions] pos_N: expected a contiguous i64 or i32 tensor of ", args.batch * args.seq,
              " elements (B * S), got ", pos_N.defined() ? pos_N.describe() : std::string("an undefined tensor"),
              ". HINT: allocate B * S integers");
  TITAN_CHECK(!begin_B.defined() || (begin_B.dtype() == DType::i64 && begin_B.is_contiguous() &&
                                     begin_B.numel() == args.batch && begin_B.device() == pos_N.device()),
              "[positions] begin_B: expected a contiguous i64 [", args.batch, "] on ", device_name(pos_N.device()),
              ", got ", begin_B.defined() ? begin_B.describe() : std::string(),
              ". HINT: one first valid slot per row, or an undefined tensor for rows that begin at 0");
}

// Defined with the other registrations in ops/builtin.cpp (the explicit list).
void register_builtin_positions(OpTable<PositionsImpl>& table);

OpTable<PositionsImpl>& positions_table() {
  return builtin_table<PositionsImpl>("positions", register_builtin_positions);
}

void positions_forward(const PositionsArgs& args, const Tensor& begin_B, Tensor& pos_N) {
  OpTimer timer("positions_forward");
  check_positions(args, begin_B, pos_N);
  positions_table().select(pos_N.device(), args, begin_B, pos_N).forward(args, begin_B, pos_N);
}

Tensor make_positions(const PositionsArgs& args, const Tensor& begin_B) {
  Tensor pos_N = Tensor::empty({args.batch * args.seq}, DType::i64,
                               begin_B.defined() ? begin_B.device() : default_device());
  positions_forward(args, begin_B, pos_N);
  return pos_N;
}

}  // namespace titan::ops
