// Contract checks and dispatch.
#include "titan/ops/swiglu/swiglu.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

void check_swiglu(const Tensor& gate_NF, const Tensor& up_NF) {
  TITAN_CHECK(gate_NF.dtype() == DType::f32 && gate_NF.is_contiguous(),
              "[swiglu] gate: expected a contiguous f32 tensor, got ", gate_NF.describe());
  TITAN_CHECK(up_NF.dtype() == DType::f32 && up_NF.is_contiguous() &&
                  up_NF.shape() == gate_NF.shape(),
              "[swiglu] up: expected contiguous f32", shape_str(gate_NF.shape()), ", got ",
              up_NF.describe(), ". HINT: gate_proj and up_proj must have the same output width");
}

// Every other tensor of the call must be a contiguous f32 tensor shaped like gate.
static void check_like_gate(const char* what, const Tensor& t, const Tensor& gate_NF) {
  TITAN_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == gate_NF.shape(),
              "[swiglu] ", what, ": expected contiguous f32", shape_str(gate_NF.shape()),
              " (the shape of gate), got ", t.describe());
}

OpTable<SwigluImpl>& swiglu_table() {
  return builtin_table<SwigluImpl>("swiglu", register_builtin_swiglu);
}

void swiglu_forward(const Tensor& gate_NF, const Tensor& up_NF, Tensor& h_NF) {
  OpTimer timer("swiglu_forward");
  check_swiglu(gate_NF, up_NF);
  check_like_gate("h", h_NF, gate_NF);
  swiglu_table().select(gate_NF.device(), gate_NF, up_NF).forward(gate_NF, up_NF, h_NF);
}

void swiglu_backward(const Tensor& dh_NF, const Tensor& gate_NF, const Tensor& up_NF,
                     Tensor& dgate_NF, Tensor& dup_NF) {
  OpTimer timer("swiglu_backward");
  check_swiglu(gate_NF, up_NF);
  check_like_gate("dh", dh_NF, gate_NF);
  check_like_gate("dgate", dgate_NF, gate_NF);
  check_like_gate("dup", dup_NF, gate_NF);
  swiglu_table()
      .select(gate_NF.device(), gate_NF, up_NF)
      .backward(dh_NF, gate_NF, up_NF, dgate_NF, dup_NF);
}

}  // namespace titan::ops
