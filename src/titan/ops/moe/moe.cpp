// The MoE block as the composition of its four ops (moe.h); contract checks once at the top.
// Shape legend: N tokens, D model width, E experts, K top_k, P = N*K dispatch rows.
#include "titan/ops/moe/moe.h"

namespace titan::ops {

static void check_f32(const char* what, const Tensor& t, const Shape& want, const char* hint) {
  TITAN_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == want, "[moe] ", what,
              ": expected contiguous f32", shape_str(want), ", got ", t.describe(), hint);
}

void check_moe(const MoeArgs& args, const Tensor& x_ND, const Tensor& w_gate_ED,
               const Tensor& w1_EFD, const Tensor& w3_EFD, const Tensor& w2_EDF) {
  TITAN_CHECK(x_ND.dtype() == DType::f32 && x_ND.is_contiguous() && x_ND.ndim() == 2,
              "[moe] x: expected a contiguous f32 [N, D] tensor, got ", x_ND.describe());
  const int64_t d = x_ND.size(1);
  TITAN_CHECK(w_gate_ED.ndim() == 2 && w_gate_ED.size(0) >= 1,
              "[moe] w_gate: expected [num_experts >= 1, ", d, "], got ", w_gate_ED.describe(),
              ". HINT: num_experts must be at least 1");
  const int64_t e = w_gate_ED.size(0);
  check_f32("w_gate", w_gate_ED, {e, d}, ". HINT: the router maps the model width D to E scores");
  TITAN_CHECK(args.top_k >= 1 && args.top_k <= e, "[moe] top_k = ", args.top_k,
              " is outside [1, num_experts = ", e,
              "]. HINT: set num_experts_per_tok to at most num_experts");
  if (args.selection_bias_E.defined()) {
    check_f32("selection_bias", args.selection_bias_E, {e}, ". HINT: one bias per expert");
  }
  TITAN_CHECK(w1_EFD.ndim() == 3 && w1_EFD.size(0) == e && w1_EFD.size(2) == d,
              "[moe] w1: expected f32[", e, ", F, ", d, "] (gate_proj), got ", w1_EFD.describe());
  const int64_t f = w1_EFD.size(1);
  check_f32("w1", w1_EFD, {e, f, d}, " (gate_proj)");
  check_f32("w3", w3_EFD, {e, f, d}, ". HINT: up_proj has the shape of gate_proj");
  check_f32("w2", w2_EDF, {e, d, f}, ". HINT: down_proj is [E, D, F], the transpose of gate_proj");
}

void moe_forward(const MoeArgs& args, const Tensor& x_ND, const Tensor& w_gate_ED,
                 const Tensor& w1_EFD, const Tensor& w3_EFD, const Tensor& w2_EDF, Tensor& out_ND,
                 Tensor& router_logits_NE, MoeSaved& saved) {
  check_moe(args, x_ND, w_gate_ED, w1_EFD, w3_EFD, w2_EDF);
  check_f32("out", out_ND, x_ND.shape(), " (the shape of x)");
  check_f32("router_logits", router_logits_NE, {x_ND.size(0), w_gate_ED.size(0)}, "");
  const int64_t p = x_ND.size(0) * args.top_k, d = x_ND.size(1);
  moe_router_forward(args, x_ND, w_gate_ED, router_logits_NE, saved);
  Tensor x_PD = Tensor::empty({p, d}, DType::f32, x_ND.device());
  moe_dispatch_forward({w_gate_ED.size(0)}, x_ND, saved.expert_NK, x_PD, saved);
  Tensor y_PD = Tensor::empty({p, d}, DType::f32, x_ND.device());
  moe_experts_forward(x_PD, saved.offsets_E1, w1_EFD, w3_EFD, w2_EDF, y_PD, saved);
  moe_combine_forward(y_PD, saved.weight_NK, saved.row_of_pair_NK, out_ND);
}

void moe_backward(const MoeArgs& args, const Tensor& dout_ND, const Tensor& drouter_logits_NE,
                  const Tensor& x_ND, const Tensor& w_gate_ED, const Tensor& w1_EFD,
                  const Tensor& w3_EFD, const Tensor& w2_EDF, const MoeSaved& saved, Tensor& dx_ND,
                  Tensor& dw_gate_ED, Tensor& dw1_EFD, Tensor& dw3_EFD, Tensor& dw2_EDF) {
  check_moe(args, x_ND, w_gate_ED, w1_EFD, w3_EFD, w2_EDF);
  const int64_t n = x_ND.size(0), d = x_ND.size(1), e = w_gate_ED.size(0), p = n * args.top_k;
  check_f32("dout", dout_ND, x_ND.shape(), " (the shape of x)");
  if (drouter_logits_NE.defined()) check_f32("drouter_logits", drouter_logits_NE, {n, e}, "");
  check_f32("dx", dx_ND, x_ND.shape(), " (the shape of x)");
  TITAN_CHECK(saved.weight_NK.defined() && saved.weight_NK.shape() == Shape({n, args.top_k}) &&
                  saved.probs_NE.defined() && saved.probs_NE.shape() == Shape({n, e}) &&
                  saved.gate_PF.defined() && saved.gate_PF.size(0) == p,
              "[moe] saved: expected the MoeSaved of a forward with N = ", n, ", E = ", e,
              ", top_k = ", args.top_k, ". HINT: pass the saved struct of the matching forward");
  const Device dev = x_ND.device();
  // Combine's unweighted backward: g_PD[r] = dout of row r's token, the gradient of the weighted
  // rows; the experts' backward applies the weights and returns dweight (moe.md).
  Tensor g_PD = Tensor::empty({p, d}, DType::f32, dev);
  Tensor none;
  moe_combine_backward(dout_ND, Tensor{}, Tensor{}, saved.row_of_pair_NK, g_PD, none);
  // The dispatch rows again (not saved); the layout it recomputes is the saved one.
  Tensor x_PD = Tensor::empty({p, d}, DType::f32, dev);
  MoeLayout layout;
  moe_dispatch_forward({e}, x_ND, saved.expert_NK, x_PD, layout);
  // dx_PD overwrites g_PD in place (moe_experts.h): one P x D buffer fewer.
  Tensor& dx_PD = g_PD;
  Tensor dweight_NK = Tensor::empty({n, args.top_k}, DType::f32, dev);
  moe_experts_backward(g_PD, saved.weight_NK, saved.pair_of_row_P, x_PD, saved.offsets_E1, w1_EFD,
                       w3_EFD, w2_EDF, saved, dx_PD, dw1_EFD, dw3_EFD, dw2_EDF, dweight_NK);
  x_PD = Tensor();
  // dx = the router's part (=), then each token's expert rows added k ascending (+=).
  moe_router_backward(args, dweight_NK, drouter_logits_NE, x_ND, w_gate_ED, saved, dx_ND,
                      dw_gate_ED);
  moe_dispatch_backward({e}, dx_PD, saved, dx_ND);
}

}  // namespace titan::ops
