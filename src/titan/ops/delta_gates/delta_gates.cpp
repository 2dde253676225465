// Contract checks and dispatch.
#include "titan/ops/delta_gates/delta_gates.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

static void check_like(const char* what, const Tensor& t, const Shape& shape) {
  TITAN_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == shape, "[delta_gates] ", what,
              ": expected contiguous f32", shape_str(shape), ", got ", t.describe());
}

void check_delta_gates(const Tensor& a_NH, const Tensor& b_NH, const Tensor& a_log_H, const Tensor& dt_bias_H) {
  TITAN_CHECK(a_NH.ndim() == 2 && a_NH.dtype() == DType::f32 && a_NH.is_contiguous(),
              "[delta_gates] a: expected a contiguous f32 [N, H] tensor, got ", a_NH.describe());
  check_like("b", b_NH, a_NH.shape());
  check_like("A_log", a_log_H, {a_NH.size(1)});
  check_like("dt_bias", dt_bias_H, {a_NH.size(1)});
}

OpTable<DeltaGatesImpl>& delta_gates_table() {
  return builtin_table<DeltaGatesImpl>("delta_gates", register_builtin_delta_gates);
}

void delta_gates_forward(const Tensor& a_NH, const Tensor& b_NH, const Tensor& a_log_H, const Tensor& dt_bias_H,
                         Tensor& g_NH, Tensor& beta_NH) {
  OpTimer timer("delta_gates_forward");
  check_delta_gates(a_NH, b_NH, a_log_H, dt_bias_H);
  check_like("g", g_NH, a_NH.shape());
  check_like("beta", beta_NH, a_NH.shape());
  delta_gates_table()
      .select(a_NH.device(), a_NH, b_NH, a_log_H, dt_bias_H)
      .forward(a_NH, b_NH, a_log_H, dt_bias_H, g_NH, beta_NH);
}

void delta_gates_backward(const Tensor& dg_NH, const Tensor& dbeta_NH, const Tensor& a_NH, const Tensor& b_NH,
                          const Tensor& a_log_H, const Tensor& dt_bias_H, Tensor& da_NH, Tensor& db_NH,
                          Tensor& da_log_H, Tensor& ddt_bias_H) {
  OpTimer timer("delta_gates_backward");
  check_delta_gates(a_NH, b_NH, a_log_H, dt_bias_H);
  check_like("dg", dg_NH, a_NH.shape());
  check_like("dbeta", dbeta_NH, a_NH.shape());
  check_like("da", da_NH, a_NH.shape());
  check_like("db", db_NH, a_NH.shape());
  check_like("dA_log", da_log_H, a_log_H.shape());
  check_like("ddt_bias", ddt_bias_H, dt_bias_H.shape());
  delta_gates_table()
      .select(a_NH.device(), a_NH, b_NH, a_log_H, dt_bias_H)
      .backward(dg_NH, dbeta_NH, a_NH, b_NH, a_log_H, dt_bias_H, da_NH, db_NH, da_log_H, ddt_bias_H);
}

}  // namespace titan::ops
