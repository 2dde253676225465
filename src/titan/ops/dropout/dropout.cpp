// Contract checks and dispatch.
#include "titan/ops/dropout/dropout.h"

#include <cmath>

#include "titan/ops/builtin.h"

namespace titan::ops {

void check_dropout(const Tensor& x, const DropoutArgs& args) {
  TITAN_CHECK(x.dtype() == DType::f32 && x.is_contiguous(), "[dropout] x: expected a contiguous f32 tensor, got ",
              x.describe());
  TITAN_CHECK(std::isfinite(args.p) && args.p >= 0.0 && args.p < 1.0, "[dropout] p = ", args.p,
              ": expected a probability in [0, 1). HINT: lora.dropout is the chance of zeroing an input element");
}

static void check_like(const char* what, const Tensor& t, const Shape& shape) {
  TITAN_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == shape, "[dropout] ", what,
              ": expected contiguous f32", shape_str(shape), ", got ", t.describe());
}

OpTable<DropoutImpl>& dropout_table() { return builtin_table<DropoutImpl>("dropout", register_builtin_dropout); }

void dropout_forward(const Tensor& x, const DropoutArgs& args, Tensor& y) {
  OpTimer timer("dropout_forward");
  check_dropout(x, args);
  check_like("y", y, x.shape());
  dropout_table().select(x.device(), x).forward(x, args, y);
}

void dropout_backward(const Tensor& dy, const DropoutArgs& args, Tensor& dx) {
  OpTimer timer("dropout_backward");
  check_dropout(dy, args);
  check_like("dx", dx, dy.shape());
  dropout_table().select(dy.device(), dy).backward(dy, args, dx);
}

}  // namespace titan::ops
