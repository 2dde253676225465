// Contract checks and dispatch.
#include "titan/ops/moe_dispatch/moe_dispatch.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

void check_moe_dispatch(const MoeDispatchArgs& args, const Tensor& x_ND, const Tensor& expert_NK) {
  TITAN_CHECK(x_ND.dtype() == DType::f32 && x_ND.is_contiguous() && x_ND.ndim() == 2,
              "[moe_dispatch] x: expected a contiguous f32 [N, D] tensor, got ", x_ND.describe());
  TITAN_CHECK(args.num_experts >= 1, "[moe_dispatch] num_experts = ", args.num_experts,
              ". HINT: num_experts must be at least 1");
  TITAN_CHECK(expert_NK.dtype() == DType::i32 && expert_NK.is_contiguous() &&
                  expert_NK.ndim() == 2 && expert_NK.size(0) == x_ND.size(0) &&
                  expert_NK.size(1) >= 1,
              "[moe_dispatch] expert: expected contiguous i32[", x_ND.size(0),
              ", top_k >= 1], got ", expert_NK.describe(), ". HINT: pass the router's expert_NK");
}

static void check_rows(const char* what, const Tensor& t, const Shape& want) {
  TITAN_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == want,
              "[moe_dispatch] ", what, ": expected contiguous f32", shape_str(want), ", got ",
              t.describe(), " (one row per (token, k) pair)");
}

OpTable<MoeDispatchImpl>& moe_dispatch_table() {
  return builtin_table<MoeDispatchImpl>("moe_dispatch", register_builtin_moe_dispatch);
}

void moe_dispatch_forward(const MoeDispatchArgs& args, const Tensor& x_ND, const Tensor& expert_NK,
                          Tensor& x_PD, MoeLayout& layout) {
  OpTimer timer("moe_dispatch_forward");
  check_moe_dispatch(args, x_ND, expert_NK);
  check_rows("x_rows", x_PD, {expert_NK.numel(), x_ND.size(1)});
  moe_dispatch_table()
      .select(x_ND.device(), args, x_ND, expert_NK)
      .forward(args, x_ND, expert_NK, x_PD, layout);
}

void moe_dispatch_backward(const MoeDispatchArgs& args, const Tensor& dx_PD,
                           const MoeLayout& layout, Tensor& dx_ND) {
  OpTimer timer("moe_dispatch_backward");
  const Tensor& row_of_pair = layout.row_of_pair_NK;
  TITAN_CHECK(row_of_pair.defined() && row_of_pair.dtype() == DType::i32 &&
                  row_of_pair.is_contiguous() && row_of_pair.ndim() == 2,
              "[moe_dispatch] layout: expected the MoeLayout of a forward, got row_of_pair ",
              row_of_pair.describe(), ". HINT: pass the layout of the matching forward");
  TITAN_CHECK(dx_ND.dtype() == DType::f32 && dx_ND.is_contiguous() && dx_ND.ndim() == 2 &&
                  dx_ND.size(0) == row_of_pair.size(0),
              "[moe_dispatch] dx: expected a contiguous f32 [", row_of_pair.size(0),
              ", D] tensor (the shape of x), got ", dx_ND.describe());
  check_rows("dx_rows", dx_PD, {row_of_pair.numel(), dx_ND.size(1)});
  moe_dispatch_table()
      .select(dx_ND.device(), args, dx_ND, row_of_pair)
      .backward(args, dx_PD, layout, dx_ND);
}

}  // namespace titan::ops
