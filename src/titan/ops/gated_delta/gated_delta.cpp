// Contract checks and dispatch.
#include "titan/ops/gated_delta/gated_delta.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

static int64_t row_width(const GatedDeltaArgs& a) { return 2 * a.k_heads * a.k_dim + a.v_heads * a.v_dim; }

void check_gated_delta(const GatedDeltaArgs& args, const Tensor& qkv_BTC, const Tensor& g_BTH,
                       const Tensor& beta_BTH) {
  TITAN_CHECK(args.k_heads > 0 && args.k_dim > 0 && args.v_heads > 0 && args.v_dim > 0 &&
                  args.v_heads % args.k_heads == 0,
              "[gated_delta] heads: expected key heads dividing value heads and positive dims, got ", args.k_heads,
              " x ", args.k_dim, " key, ", args.v_heads, " x ", args.v_dim,
              " value. HINT: linear_num_value_heads must be a multiple of linear_num_key_heads");
  TITAN_CHECK(args.chunk > 0 && args.eps >= 0.0f, "[gated_delta] chunk must be positive and eps >= 0, got chunk ",
              args.chunk, ", eps ", args.eps);
  TITAN_CHECK(qkv_BTC.ndim() == 3 && qkv_BTC.dtype() == DType::f32 && qkv_BTC.is_contiguous() &&
                  qkv_BTC.size(2) == row_width(args),
              "[gated_delta] qkv: expected a contiguous f32 [B, T, ", row_width(args), "] tensor (q, k: ",
              args.k_heads, " x ", args.k_dim, ", v: ", args.v_heads, " x ", args.v_dim, "), got ",
              qkv_BTC.describe());
  const Shape gates{qkv_BTC.size(0), qkv_BTC.size(1), args.v_heads};
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"g", &g_BTH}, {"beta", &beta_BTH}}) {
    TITAN_CHECK(t->dtype() == DType::f32 && t->is_contiguous() && t->shape() == gates, "[gated_delta] ", name,
                ": expected contiguous f32", shape_str(gates), " (one per token and value head), got ",
                t->describe());
  }
}

static void check_like(const char* what, const Tensor& t, const Shape& shape) {
  TITAN_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == shape, "[gated_delta] ", what,
              ": expected contiguous f32", shape_str(shape), ", got ", t.describe());
}

OpTable<GatedDeltaImpl>& gated_delta_table() {
  return builtin_table<GatedDeltaImpl>("gated_delta", register_builtin_gated_delta);
}

void gated_delta_forward(const GatedDeltaArgs& args, const Tensor& qkv_BTC, const Tensor& g_BTH,
                         const Tensor& beta_BTH, Tensor& o_BTV, Tensor& state_BHKV) {
  OpTimer timer("gated_delta_forward");
  check_gated_delta(args, qkv_BTC, g_BTH, beta_BTH);
  const int64_t B = qkv_BTC.size(0), T = qkv_BTC.size(1);
  check_like("o", o_BTV, {B, T, args.v_heads * args.v_dim});
  if (state_BHKV.defined()) check_like("state", state_BHKV, {B, args.v_heads, args.k_dim, args.v_dim});
  gated_delta_table().select(qkv_BTC.device(), args, qkv_BTC).forward(args, qkv_BTC, g_BTH, beta_BTH, o_BTV,
                                                                      state_BHKV);
}

void gated_delta_backward(const GatedDeltaArgs& args, const Tensor& do_BTV, const Tensor& qkv_BTC,
                          const Tensor& g_BTH, const Tensor& beta_BTH, Tensor& dqkv_BTC, Tensor& dg_BTH,
                          Tensor& dbeta_BTH) {
  OpTimer timer("gated_delta_backward");
  check_gated_delta(args, qkv_BTC, g_BTH, beta_BTH);
  const int64_t B = qkv_BTC.size(0), T = qkv_BTC.size(1);
  check_like("do", do_BTV, {B, T, args.v_heads * args.v_dim});
  check_like("dqkv", dqkv_BTC, qkv_BTC.shape());
  check_like("dg", dg_BTH, g_BTH.shape());
  check_like("dbeta", dbeta_BTH, beta_BTH.shape());
  gated_delta_table()
      .select(qkv_BTC.device(), args, qkv_BTC)
      .backward(args, do_BTV, qkv_BTC, g_BTH, beta_BTH, dqkv_BTC, dg_BTH, dbeta_BTH);
}

}  // namespace titan::ops
