// Contract checks and dispatch.
#include "titan/ops/matmul/linear.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

void check_linear(const Tensor& x_NI, const Tensor& w_OI, const Tensor& b_O) {
  TITAN_CHECK(w_OI.defined() && w_OI.ndim() == 2 && (w_OI.dtype() == DType::f32 || w_OI.dtype() == DType::bf16) &&
                  w_OI.is_contiguous(),
              "[linear] weight: expected a contiguous f32 or bf16 [out, in] tensor, got ",
              w_OI.defined() ? w_OI.describe() : std::string("an undefined tensor"));
  const int64_t in = w_OI.size(1), out = w_OI.size(0);
  // bf16 x with an f32 weight: the master weight, rounded as it is read.
  const bool dtype_ok = x_NI.defined() && (x_NI.dtype() == w_OI.dtype() || x_NI.dtype() == DType::bf16);
  TITAN_CHECK(x_NI.defined() && x_NI.ndim() >= 1 && dtype_ok && x_NI.is_contiguous() && x_NI.size(-1) == in,
              "[linear] x: expected a contiguous ", dtype_name(w_OI.dtype()), " [..., ", in, "] tensor, got ",
              x_NI.defined() ? x_NI.describe() : std::string("an undefined tensor"),
              ". HINT: x's last dim must equal the weight's in_features, and x must have the weight's dtype "
              "(or bf16 with an f32 weight; weight ", w_OI.describe(), ")");
  if (b_O.defined()) {
    TITAN_CHECK(b_O.ndim() == 1 && b_O.size(0) == out && b_O.dtype() == DType::f32 &&
                    b_O.is_contiguous(),
                "[linear] bias: expected f32[", out, "], got ", b_O.describe(),
                ". HINT: the bias must match the weight's out_features");
  }
}

// y/dy: x's leading dims + [out], or flat [N, out].
static void check_output(const char* what, const Tensor& y_NO, int64_t n, int64_t out) {
  TITAN_CHECK(y_NO.defined() && y_NO.dtype() == DType::f32 && y_NO.is_contiguous() &&
                  y_NO.ndim() >= 1 && y_NO.size(-1) == out && y_NO.numel() == n * out,
              "[linear] ", what, ": expected a contiguous f32 tensor of ", n, " rows x ", out,
              " (e.g. [", n, ", ", out, "]), got ",
              y_NO.defined() ? y_NO.describe() : std::string("an undefined tensor"));
}

OpTable<LinearImpl>& linear_table() {
  return builtin_table<LinearImpl>("linear", register_builtin_linear);
}

void linear_forward(const Tensor& x_NI, const Tensor& w_OI, const Tensor& b_O, Tensor& y_NO) {
  OpTimer timer("linear_forward");
  check_linear(x_NI, w_OI, b_O);
  check_output("y", y_NO, x_NI.numel() / w_OI.size(1), w_OI.size(0));
  linear_table().select(x_NI.device(), x_NI, w_OI, b_O).forward(x_NI, w_OI, b_O, y_NO);
}

void linear_backward(const Tensor& dy_NO, const Tensor& x_NI, const Tensor& w_OI, Tensor& dx_NI,
                     Tensor& dw_OI, Tensor& db_O) {
  OpTimer timer("linear_backward");
  check_linear(x_NI, w_OI, Tensor{});
  check_output("dy", dy_NO, x_NI.numel() / w_OI.size(1), w_OI.size(0));
  if (dx_NI.defined()) {
    TITAN_CHECK(dx_NI.shape() == x_NI.shape() && dx_NI.dtype() == DType::f32 &&
                    dx_NI.is_contiguous(),
                "[linear] dx: expected f32", shape_str(x_NI.shape()), " like x, got ",
                dx_NI.describe());
  }
  if (dw_OI.defined()) {
    TITAN_CHECK(dw_OI.shape() == w_OI.shape() && dw_OI.dtype() == DType::f32 && dw_OI.is_contiguous(),
                "[linear] dweight: expected f32", shape_str(w_OI.shape()), " like the weight, got ",
                dw_OI.describe());
  }
  if (db_O.defined()) {
    TITAN_CHECK(db_O.ndim() == 1 && db_O.size(0) == w_OI.size(0) && db_O.dtype() == DType::f32,
                "[linear] dbias: expected f32[", w_OI.size(0), "], got ", db_O.describe());
  }
  linear_table()
      .select(x_NI.device(), x_NI, w_OI, db_O)
      .backward(dy_NO, x_NI, w_OI, dx_NI, dw_OI, db_O);
}

}  // namespace titan::ops
