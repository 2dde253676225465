// Contract checks and dispatch.
#include "titan/ops/causal_conv1d/causal_conv1d.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

void check_causal_conv1d(const Tensor& x_BTC, const Tensor& weight_CK) {
  TITAN_CHECK(x_BTC.ndim() == 3 && x_BTC.dtype() == DType::f32 && x_BTC.is_contiguous(),
              "[causal_conv1d] x: expected a contiguous f32 [B, T, C] tensor, got ", x_BTC.describe());
  TITAN_CHECK(weight_CK.ndim() == 2 && weight_CK.dtype() == DType::f32 && weight_CK.is_contiguous() &&
                  weight_CK.size(0) == x_BTC.size(2) && weight_CK.size(1) > 0,
              "[causal_conv1d] weight: expected contiguous f32[", x_BTC.size(2), ", K] (one filter per channel), got ",
              weight_CK.describe(), ". HINT: the conv's channels must equal x's last dim");
}

OpTable<CausalConv1dImpl>& causal_conv1d_table() {
  return builtin_table<CausalConv1dImpl>("causal_conv1d", register_builtin_causal_conv1d);
}

static void check_like(const char* what, const Tensor& t, const Shape& shape) {
  TITAN_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == shape, "[causal_conv1d] ", what,
              ": expected contiguous f32", shape_str(shape), ", got ", t.describe());
}

void causal_conv1d_forward(const CausalConv1dArgs& args, const Tensor& x_BTC, const Tensor& weight_CK, Tensor& y_BTC,
                           Tensor& state_BSC) {
  OpTimer timer("causal_conv1d_forward");
  check_causal_conv1d(x_BTC, weight_CK);
  check_like("y", y_BTC, x_BTC.shape());
  if (state_BSC.defined()) check_like("state", state_BSC, {x_BTC.size(0), weight_CK.size(1) - 1, x_BTC.size(2)});
  causal_conv1d_table().select(x_BTC.device(), x_BTC, weight_CK).forward(args, x_BTC, weight_CK, y_BTC, state_BSC);
}

void causal_conv1d_backward(const CausalConv1dArgs& args, const Tensor& dy_BTC, const Tensor& x_BTC,
                            const Tensor& weight_CK, Tensor& dx_BTC, Tensor& dweight_CK) {
  OpTimer timer("causal_conv1d_backward");
  check_causal_conv1d(x_BTC, weight_CK);
  check_like("dy", dy_BTC, x_BTC.shape());
  check_like("dx", dx_BTC, x_BTC.shape());
  check_like("dweight", dweight_CK, weight_CK.shape());
  causal_conv1d_table()
      .select(x_BTC.device(), x_BTC, weight_CK)
      .backward(args, dy_BTC, x_BTC, weight_CK, dx_BTC, dweight_CK);
}

}  // namespace titan::ops
