// Contract checks, the per-call scalars, and dispatch.
#include "titan/ops/adamw/adamw.h"

#include <cmath>

#include "titan/ops/builtin.h"

namespace titan::ops {

static void check_like_param(const char* what, const Tensor& t, const Tensor& param, DType dtype) {
  TITAN_CHECK(t.dtype() == dtype && t.is_contiguous() && t.shape() == param.shape() && t.device() == param.device(),
              "[adamw] ", what, ": expected contiguous ", dtype_name(dtype), shape_str(param.shape()),
              " (the shape of param), got ", t.describe(),
              ". HINT: optimizer state must be allocated like its parameter");
}

void check_adamw(const Tensor& param, const Tensor& grad, const Tensor& exp_avg,
                 const Tensor& exp_avg_sq, const AdamWArgs& args) {
  TITAN_CHECK(param.dtype() == DType::f32 && param.is_contiguous(),
              "[adamw] param: expected a contiguous f32 tensor, got ", param.describe());
  check_like_param("grad", grad, param, DType::f32);
  TITAN_CHECK(exp_avg.dtype() == DType::f32 || exp_avg.dtype() == DType::bf16, "[adamw] exp_avg: expected f32 or "
              "bf16 moments, got ", exp_avg.describe());
  check_like_param("exp_avg", exp_avg, param, exp_avg.dtype());
  check_like_param("exp_avg_sq", exp_avg_sq, param, exp_avg.dtype());  // both moments in one dtype
  TITAN_CHECK(args.step >= 1, "[adamw] step: expected >= 1 (1-based, after the update), got ",
              args.step);
  TITAN_CHECK(args.beta1 >= 0.0 && args.beta1 < 1.0 && args.beta2 >= 0.0 && args.beta2 < 1.0,
              "[adamw] betas: expected each in [0, 1), got (", args.beta1, ", ", args.beta2, ")");
  TITAN_CHECK(args.eps >= 0.0 && args.lr >= 0.0 && args.weight_decay >= 0.0,
              "[adamw] lr, eps, weight_decay: expected >= 0, got lr=", args.lr, " eps=", args.eps,
              " weight_decay=", args.weight_decay);
}

AdamWScalars adamw_scalars(const AdamWArgs& a) {
  const double t = static_cast<double>(a.step);
  return {1.0 - a.lr * a.weight_decay,
          1.0 - a.beta1,
          a.beta2,
          1.0 - a.beta2,
          a.lr / (1.0 - std::pow(a.beta1, t)),
          std::sqrt(1.0 - std::pow(a.beta2, t)),
          a.eps};
}

OpTable<AdamWImpl>& adamw_table() {
  return builtin_table<AdamWImpl>("adamw", register_builtin_adamw);
}

void adamw_step(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                const AdamWArgs& args) {
  OpTimer timer("adamw_forward");
  check_adamw(param, grad, exp_avg, exp_avg_sq, args);
  adamw_table().select(param.device(), param, grad).forward(param, grad, exp_avg, exp_avg_sq, args);
}

}  // namespace titan::ops
