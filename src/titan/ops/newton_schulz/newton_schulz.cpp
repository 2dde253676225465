// Contract checks and dispatch.
#include "titan/ops/newton_schulz/newton_schulz.h"

#include <algorithm>
#include <cmath>

#include "titan/ops/builtin.h"

namespace titan::ops {

void check_newton_schulz(const Tensor& g, const Tensor& out, const NewtonSchulzArgs& args) {
  TITAN_CHECK(g.dtype() == DType::f32 && g.is_contiguous() && g.ndim() >= 2,
              "[newton_schulz] g: expected a contiguous f32 tensor [..., R, C], got ", g.describe());
  TITAN_CHECK(out.dtype() == DType::f32 && out.is_contiguous() && out.shape() == g.shape() &&
                  out.device() == g.device(),
              "[newton_schulz] out: expected contiguous f32", shape_str(g.shape()), " (the shape of g), got ",
              out.describe());
  TITAN_CHECK(args.steps >= 0 && args.steps < 100, "[newton_schulz] steps: expected 0..99 (torch refuses >= 100), got ",
              args.steps);
  TITAN_CHECK(std::isfinite(args.a) && std::isfinite(args.b) && std::isfinite(args.c) && args.eps > 0.0,
              "[newton_schulz] coefficients (", args.a, ", ", args.b, ", ", args.c, ") must be finite and eps=",
              args.eps, " > 0");
}

static float round_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

void newton_schulz_load(int64_t R, int64_t C, const float* g, float* x, double eps) {
  const bool tall = R > C;
  const int64_t c = tall ? R : C;
  double sq = 0.0;
  for (int64_t i = 0; i < R; ++i) {
    for (int64_t j = 0; j < C; ++j) {
      const float v = round_bf16(g[i * C + j]);
      (tall ? x[j * c + i] : x[i * c + j]) = v;
      sq += static_cast<double>(v) * v;
    }
  }
  // torch: ortho_grad.div_(ortho_grad.norm().clamp(min=eps)), all in bf16 tensors.
  const float norm = std::max(round_bf16(static_cast<float>(std::sqrt(sq))), round_bf16(static_cast<float>(eps)));
  for (int64_t k = 0; k < R * C; ++k) x[k] = round_bf16(x[k] / norm);
}

void newton_schulz_store(int64_t R, int64_t C, const float* x, float* out) {
  if (R <= C) {
    std::copy(x, x + R * C, out);
    return;
  }
  for (int64_t i = 0; i < R; ++i) {
    for (int64_t j = 0; j < C; ++j) out[i * C + j] = x[j * R + i];
  }
}

OpTable<NewtonSchulzImpl>& newton_schulz_table() {
  return builtin_table<NewtonSchulzImpl>("newton_schulz", register_builtin_newton_schulz);
}

void newton_schulz(const Tensor& g, Tensor& out, const NewtonSchulzArgs& args) {
  OpTimer timer("newton_schulz_forward");
  check_newton_schulz(g, out, args);
  newton_schulz_table().select(g.device(), g).forward(g, out, args);
}

}  // namespace titan::ops
