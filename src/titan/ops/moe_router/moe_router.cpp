// Contract checks and dispatch.
#include "titan/ops/moe_router/moe_router.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

static void check_f32(const char* what, const Tensor& t, const Shape& want, const char* hint) {
  TITAN_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == want, "[moe_router] ",
              what, ": expected contiguous f32", shape_str(want), ", got ", t.describe(), hint);
}

void check_moe_router(const MoeRouterArgs& args, const Tensor& x_ND, const Tensor& w_gate_ED) {
  TITAN_CHECK(x_ND.dtype() == DType::f32 && x_ND.is_contiguous() && x_ND.ndim() == 2,
              "[moe_router] x: expected a contiguous f32 [N, D] tensor, got ", x_ND.describe());
  const int64_t d = x_ND.size(1);
  TITAN_CHECK(w_gate_ED.ndim() == 2 && w_gate_ED.size(0) >= 1,
              "[moe_router] w_gate: expected [num_experts >= 1, ", d, "], got ",
              w_gate_ED.describe(), ". HINT: num_experts must be at least 1");
  const int64_t e = w_gate_ED.size(0);
  check_f32("w_gate", w_gate_ED, {e, d}, ". HINT: the router maps the model width D to E scores");
  TITAN_CHECK(args.top_k >= 1 && args.top_k <= e, "[moe_router] top_k = ", args.top_k,
              " is outside [1, num_experts = ", e,
              "]. HINT: set num_experts_per_tok to at most num_experts");
  if (args.selection_bias_E.defined()) {
    check_f32("selection_bias", args.selection_bias_E, {e}, ". HINT: one bias per expert");
  }
}

OpTable<MoeRouterImpl>& moe_router_table() {
  return builtin_table<MoeRouterImpl>("moe_router", register_builtin_moe_router);
}

void moe_router_forward(const MoeRouterArgs& args, const Tensor& x_ND, const Tensor& w_gate_ED,
                        Tensor& logits_NE, MoeRouting& routing) {
  OpTimer timer("moe_router_forward");
  check_moe_router(args, x_ND, w_gate_ED);
  check_f32("logits", logits_NE, {x_ND.size(0), w_gate_ED.size(0)}, "");
  moe_router_table()
      .select(x_ND.device(), args, x_ND, w_gate_ED)
      .forward(args, x_ND, w_gate_ED, logits_NE, routing);
}

void moe_router_backward(const MoeRouterArgs& args, const Tensor& dweight_NK,
                         const Tensor& dlogits_NE, const Tensor& x_ND, const Tensor& w_gate_ED,
                         const MoeRouting& routing, Tensor& dx_ND, Tensor& dw_gate_ED) {
  OpTimer timer("moe_router_backward");
  check_moe_router(args, x_ND, w_gate_ED);
  const int64_t n = x_ND.size(0), e = w_gate_ED.size(0);
  check_f32("dweight", dweight_NK, {n, args.top_k}, " (the shape of weight)");
  if (dlogits_NE.defined()) check_f32("dlogits", dlogits_NE, {n, e}, " (the shape of logits)");
  check_f32("dx", dx_ND, x_ND.shape(), " (the shape of x)");
  check_f32("dw_gate", dw_gate_ED, w_gate_ED.shape(), " (the shape of w_gate)");
  TITAN_CHECK(routing.weight_NK.defined() && routing.weight_NK.shape() == Shape({n, args.top_k}) &&
                  routing.probs_NE.defined() && routing.probs_NE.shape() == Shape({n, e}) &&
                  routing.expert_NK.defined() && routing.expert_NK.shape() == Shape({n, args.top_k}),
              "[moe_router] routing: expected the MoeRouting of a forward with N = ", n, ", E = ", e,
              ", top_k = ", args.top_k, ". HINT: pass the routing of the matching forward");
  moe_router_table()
      .select(x_ND.device(), args, x_ND, w_gate_ED)
      .backward(args, dweight_NK, dlogits_NE, x_ND, w_gate_ED, routing, dx_ND, dw_gate_ED);
}

}  // namespace titan::ops
