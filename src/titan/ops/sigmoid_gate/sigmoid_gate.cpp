// Contract checks and dispatch.
#include "titan/ops/sigmoid_gate/sigmoid_gate.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

void check_sigmoid_gate(const Tensor& x_NF, const Tensor& gate_NG) {
  TITAN_CHECK(x_NF.ndim() == 2 && x_NF.dtype() == DType::f32 && x_NF.is_contiguous(),
              "[sigmoid_gate] x: expected a contiguous f32 [N, F] tensor, got ", x_NF.describe());
  TITAN_CHECK(gate_NG.ndim() == 2 && gate_NG.dtype() == DType::f32 && gate_NG.is_contiguous() &&
                  gate_NG.size(0) == x_NF.size(0) && gate_NG.size(1) > 0 && x_NF.size(1) % gate_NG.size(1) == 0,
              "[sigmoid_gate] gate: expected contiguous f32[", x_NF.size(0), ", G] with G dividing ", x_NF.size(1),
              ", got ", gate_NG.describe(), ". HINT: one gate per feature, or per equal group of features");
}

static void check_like(const char* what, const Tensor& t, const Shape& shape) {
  TITAN_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == shape, "[sigmoid_gate] ", what,
              ": expected contiguous f32", shape_str(shape), ", got ", t.describe());
}

OpTable<SigmoidGateImpl>& sigmoid_gate_table() {
  return builtin_table<SigmoidGateImpl>("sigmoid_gate", register_builtin_sigmoid_gate);
}

void sigmoid_gate_forward(const Tensor& x_NF, const Tensor& gate_NG, Tensor& y_NF) {
  OpTimer timer("sigmoid_gate_forward");
  check_sigmoid_gate(x_NF, gate_NG);
  check_like("y", y_NF, x_NF.shape());
  sigmoid_gate_table().select(x_NF.device(), x_NF, gate_NG).forward(x_NF, gate_NG, y_NF);
}

void sigmoid_gate_backward(const Tensor& dy_NF, const Tensor& x_NF, const Tensor& gate_NG, Tensor& dx_NF,
                           Tensor& dgate_NG) {
  OpTimer timer("sigmoid_gate_backward");
  check_sigmoid_gate(x_NF, gate_NG);
  check_like("dy", dy_NF, x_NF.shape());
  check_like("dx", dx_NF, x_NF.shape());
  check_like("dgate", dgate_NG, gate_NG.shape());
  sigmoid_gate_table().select(x_NF.device(), x_NF, gate_NG).backward(dy_NF, x_NF, gate_NG, dx_NF, dgate_NG);
}

}  // namespace titan::ops
