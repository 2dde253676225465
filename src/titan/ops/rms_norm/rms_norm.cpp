// Contract checks and dispatch.
#include "titan/ops/rms_norm/rms_norm.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

void check_rms_norm(const Tensor& x_ND, const Tensor& weight_D) {
  TITAN_CHECK(x_ND.ndim() == 2 && x_ND.dtype() == DType::f32 && x_ND.is_contiguous(),
              "[rms_norm] x: expected a contiguous f32 [N, D] tensor, got ", x_ND.describe());
  TITAN_CHECK(weight_D.ndim() == 1 && weight_D.size(0) == x_ND.size(1) &&
                  weight_D.dtype() == DType::f32,
              "[rms_norm] weight: expected f32[", x_ND.size(1), "], got ", weight_D.describe(),
              ". HINT: the weight must match x's last dim");
}

std::vector<float> offset_weight(const RmsNormArgs& args, const Tensor& weight_D) {
  std::vector<float> w(static_cast<size_t>(weight_D.numel()));
  const float* p = weight_D.data<float>();
  for (size_t j = 0; j < w.size(); ++j) w[j] = args.weight_offset + p[j];
  return w;
}

OpTable<RmsNormImpl>& rms_norm_table() {
  return builtin_table<RmsNormImpl>("rms_norm", register_builtin_rms_norm);
}

void rms_norm_forward(const RmsNormArgs& args, const Tensor& x_ND, const Tensor& weight_D,
                      Tensor& y_ND, RmsNormSaved& saved) {
  OpTimer timer("rms_norm_forward");
  check_rms_norm(x_ND, weight_D);
  TITAN_CHECK(y_ND.shape() == x_ND.shape(), "[rms_norm] y: expected ", shape_str(x_ND.shape()),
              ", got ", y_ND.describe());
  if (!saved.rstd_N.defined() || saved.rstd_N.numel() != x_ND.size(0) || saved.rstd_N.device() != x_ND.device()) {
    saved.rstd_N = Tensor::empty({x_ND.size(0)}, DType::f32, x_ND.device());
  }
  rms_norm_table().select(x_ND.device(), x_ND, weight_D).forward(args, x_ND, weight_D, y_ND, saved);
}

void rms_norm_backward(const RmsNormArgs& args, const Tensor& dy_ND, const Tensor& x_ND,
                       const Tensor& weight_D, const RmsNormSaved& saved, Tensor& dx_ND,
                       Tensor& dweight_D) {
  OpTimer timer("rms_norm_backward");
  check_rms_norm(x_ND, weight_D);
  TITAN_CHECK(dy_ND.shape() == x_ND.shape() && dx_ND.shape() == x_ND.shape() &&
                  dweight_D.shape() == weight_D.shape(),
              "[rms_norm] backward: dy ", dy_ND.describe(), ", dx ", dx_ND.describe(), ", dweight ",
              dweight_D.describe(), " must match x ", x_ND.describe(), " and weight ",
              weight_D.describe());
  rms_norm_table()
      .select(x_ND.device(), x_ND, weight_D)
      .backward(args, dy_ND, x_ND, weight_D, saved, dx_ND, dweight_D);
}

}  // namespace titan::ops
