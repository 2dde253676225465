// Contract checks and dispatch.
#include "titan/ops/moe_experts/moe_experts.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

static void check_dtype(const char* what, const Tensor& t, DType dtype, const Shape& want, const char* hint) {
  TITAN_CHECK(t.dtype() == dtype && t.is_contiguous() && t.shape() == want, "[moe_experts] ", what,
              ": expected contiguous ", dtype_name(dtype), shape_str(want), ", got ", t.describe(), hint);
}
static void check_f32(const char* what, const Tensor& t, const Shape& want, const char* hint) {
  check_dtype(what, t, DType::f32, want, hint);
}

void check_moe_experts(const Tensor& x_PD, const Tensor& offsets_E1, const Tensor& w1_EFD,
                       const Tensor& w3_EFD, const Tensor& w2_EDF) {
  TITAN_CHECK((x_PD.dtype() == DType::f32 || x_PD.dtype() == DType::bf16) && x_PD.is_contiguous() && x_PD.ndim() == 2,
              "[moe_experts] x: expected a contiguous f32 or bf16 [P, D] tensor, got ", x_PD.describe());
  const DType dtype = x_PD.dtype();
  const int64_t p = x_PD.size(0), d = x_PD.size(1);
  TITAN_CHECK(w1_EFD.ndim() == 3 && w1_EFD.size(0) >= 1 && w1_EFD.size(2) == d,
              "[moe_experts] w1: expected ", dtype_name(dtype), "[E >= 1, F, ", d, "] (gate_proj), got ",
              w1_EFD.describe());
  const int64_t e = w1_EFD.size(0), f = w1_EFD.size(1);
  const char* same = ". HINT: x and the three expert weights share one dtype (f32, or bf16 for bf16 compute)";
  check_dtype("w1", w1_EFD, dtype, {e, f, d}, same);
  check_dtype("w3", w3_EFD, dtype, {e, f, d}, ". HINT: up_proj has the shape and dtype of gate_proj");
  check_dtype("w2", w2_EDF, dtype, {e, d, f}, ". HINT: down_proj is [E, D, F], the transpose of gate_proj, in its dtype");
  TITAN_CHECK(offsets_E1.dtype() == DType::i64 && offsets_E1.is_contiguous() &&
                  offsets_E1.shape() == Shape({e + 1}),
              "[moe_experts] offsets: expected contiguous i64[", e + 1, "], got ",
              offsets_E1.describe(), ". HINT: pass the dispatch layout's offsets_E1");
  if (offsets_E1.is_meta()) return;  // the split check reads the offsets
  const int64_t* offsets = offsets_E1.data<int64_t>();
  TITAN_CHECK(offsets[0] == 0 && offsets[e] == p, "[moe_experts] offsets: expected rows [0, ", p,
              ") split over the experts, got [", offsets[0], ", ", offsets[e],
              "). HINT: x and offsets must come from the same dispatch");
}

OpTable<MoeExpertsImpl>& moe_experts_table() {
  return builtin_table<MoeExpertsImpl>("moe_experts", register_builtin_moe_experts);
}

void moe_experts_forward(const Tensor& x_PD, const Tensor& offsets_E1, const Tensor& w1_EFD,
                         const Tensor& w3_EFD, const Tensor& w2_EDF, Tensor& y_PD,
                         MoeExpertsSaved& saved) {
  OpTimer timer("moe_experts_forward");
  check_moe_experts(x_PD, offsets_E1, w1_EFD, w3_EFD, w2_EDF);
  check_f32("y", y_PD, x_PD.shape(), " (the shape of x)");
  moe_experts_table()
      .select(x_PD.device(), x_PD, w1_EFD)
      .forward(x_PD, offsets_E1, w1_EFD, w3_EFD, w2_EDF, y_PD, saved);
}

void moe_experts_backward(const Tensor& dy_PD, const Tensor& weight_NK,
                          const Tensor& pair_of_row_P, const Tensor& x_PD,
                          const Tensor& offsets_E1, const Tensor& w1_EFD, const Tensor& w3_EFD,
                          const Tensor& w2_EDF, const MoeExpertsSaved& saved, Tensor& dx_PD,
                          Tensor& dw1_EFD, Tensor& dw3_EFD, Tensor& dw2_EDF, Tensor& dweight_NK) {
  OpTimer timer("moe_experts_backward");
  check_moe_experts(x_PD, offsets_E1, w1_EFD, w3_EFD, w2_EDF);
  const int64_t p = x_PD.size(0), f = w1_EFD.size(1);
  check_f32("dy", dy_PD, x_PD.shape(), " (the shape of x)");
  check_f32("dx", dx_PD, x_PD.shape(), " (the shape of x)");
  check_f32("dw1", dw1_EFD, w1_EFD.shape(), " (the shape of w1)");
  check_f32("dw3", dw3_EFD, w3_EFD.shape(), " (the shape of w3)");
  check_f32("dw2", dw2_EDF, w2_EDF.shape(), " (the shape of w2)");
  check_f32("saved.gate", saved.gate_PF, {p, f}, ". HINT: pass the saved struct of the forward");
  check_f32("saved.up", saved.up_PF, {p, f}, ". HINT: pass the saved struct of the forward");
  const bool weighted = weight_NK.defined();
  TITAN_CHECK(weighted == pair_of_row_P.defined() && weighted == dweight_NK.defined(),
              "[moe_experts] weight, pair_of_row and dweight: expected all three or none. HINT: "
              "the weighted backward needs the layout's pair_of_row and writes dweight");
  if (weighted) {
    TITAN_CHECK(weight_NK.numel() == p, "[moe_experts] weight: expected ", p,
                " routing weights (one per row), got ", weight_NK.describe());
    check_f32("weight", weight_NK, weight_NK.shape(), "");
    check_f32("dweight", dweight_NK, weight_NK.shape(), " (the shape of weight)");
    TITAN_CHECK(pair_of_row_P.dtype() == DType::i32 && pair_of_row_P.is_contiguous() &&
                    pair_of_row_P.shape() == Shape({p}),
                "[moe_experts] pair_of_row: expected contiguous i32[", p, "], got ",
                pair_of_row_P.describe(), ". HINT: pass the dispatch layout's pair_of_row_P");
  }
  moe_experts_table()
      .select(x_PD.device(), x_PD, w1_EFD)
      .backward(dy_PD, weight_NK, pair_of_row_P, x_PD, offsets_E1, w1_EFD, w3_EFD, w2_EDF, saved,
                dx_PD, dw1_EFD, dw3_EFD, dw2_EDF, dweight_NK);
}

}  // namespace titan::ops
