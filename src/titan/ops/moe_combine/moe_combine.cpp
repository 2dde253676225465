// Contract checks and dispatch.
#include "titan/ops/moe_combine/moe_combine.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

static void check_f32(const char* what, const Tensor& t, const Shape& want, const char* hint) {
  TITAN_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == want, "[moe_combine] ",
              what, ": expected contiguous f32", shape_str(want), ", got ", t.describe(), hint);
}

void check_moe_combine(const Tensor& y_PD, const Tensor& weight_NK, const Tensor& row_of_pair_NK) {
  TITAN_CHECK(row_of_pair_NK.defined() && row_of_pair_NK.dtype() == DType::i32 &&
                  row_of_pair_NK.is_contiguous() && row_of_pair_NK.ndim() == 2 &&
                  row_of_pair_NK.size(1) >= 1,
              "[moe_combine] row_of_pair: expected a contiguous i32 [N, top_k >= 1] tensor, got ",
              row_of_pair_NK.describe(), ". HINT: pass the dispatch layout's row_of_pair_NK");
  if (weight_NK.defined()) {
    check_f32("weight", weight_NK, row_of_pair_NK.shape(), " (the shape of row_of_pair)");
  }
  if (y_PD.defined()) {
    TITAN_CHECK(y_PD.dtype() == DType::f32 && y_PD.is_contiguous() && y_PD.ndim() == 2 &&
                    y_PD.size(0) == row_of_pair_NK.numel(),
                "[moe_combine] y: expected a contiguous f32 [", row_of_pair_NK.numel(),
                ", D] tensor (one row per pair), got ", y_PD.describe());
  }
}

OpTable<MoeCombineImpl>& moe_combine_table() {
  return builtin_table<MoeCombineImpl>("moe_combine", register_builtin_moe_combine);
}

void moe_combine_forward(const Tensor& y_PD, const Tensor& weight_NK,
                         const Tensor& row_of_pair_NK, Tensor& out_ND) {
  OpTimer timer("moe_combine_forward");
  TITAN_CHECK(y_PD.defined(), "[moe_combine] y: expected the experts' output rows, got none");
  check_moe_combine(y_PD, weight_NK, row_of_pair_NK);
  check_f32("out", out_ND, {row_of_pair_NK.size(0), y_PD.size(1)}, "");
  moe_combine_table()
      .select(y_PD.device(), weight_NK, row_of_pair_NK)
      .forward(y_PD, weight_NK, row_of_pair_NK, out_ND);
}

void moe_combine_backward(const Tensor& dout_ND, const Tensor& y_PD, const Tensor& weight_NK,
                          const Tensor& row_of_pair_NK, Tensor& dy_PD, Tensor& dweight_NK) {
  OpTimer timer("moe_combine_backward");
  check_moe_combine(y_PD, weight_NK, row_of_pair_NK);
  const bool weighted = weight_NK.defined();
  TITAN_CHECK(weighted == y_PD.defined() && weighted == dweight_NK.defined(),
              "[moe_combine] weight, y and dweight: expected all three (weighted) or none "
              "(unweighted). HINT: dweight = dout . y needs y");
  TITAN_CHECK(dout_ND.dtype() == DType::f32 && dout_ND.is_contiguous() && dout_ND.ndim() == 2 &&
                  dout_ND.size(0) == row_of_pair_NK.size(0),
              "[moe_combine] dout: expected a contiguous f32 [", row_of_pair_NK.size(0),
              ", D] tensor, got ", dout_ND.describe());
  check_f32("dy", dy_PD, {row_of_pair_NK.numel(), dout_ND.size(1)}, " (one row per pair)");
  if (weighted) {
    check_f32("y", y_PD, dy_PD.shape(), " (the shape of dy)");
    check_f32("dweight", dweight_NK, weight_NK.shape(), " (the shape of weight)");
  }
  moe_combine_table()
      .select(dout_ND.device(), weight_NK, row_of_pair_NK)
      .backward(dout_ND, y_PD, weight_NK, row_of_pair_NK, dy_PD, dweight_NK);
}

}  // namespace titan::ops
