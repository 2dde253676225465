// Muon's elementwise passes on CPU: the reference's per-element f32 math, split over threads (each
// element is independent, so the bits do not depend on the thread count).
#include "titan/core/parallel.h"
#include "titan/ops/muon_update/muon_update.h"

namespace titan::ops {
namespace {

constexpr int64_t kGrain = 1 << 15;

void momentum_cpu(Tensor& buf, const Tensor& grad, Tensor& upd, double momentum, bool nesterov) {
  const auto m = static_cast<float>(momentum);
  float* b = buf.data<float>();
  const float* g = grad.data<float>();
  float* u = upd.data<float>();
  parallel_for(grad.numel(), kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      b[i] = torch_lerp(b[i], g[i], 1.0f - m);
      u[i] = nesterov ? torch_lerp(g[i], b[i], m) : b[i];
    }
  });
}

void apply_cpu(Tensor& param, const Tensor& orth, double decay, double step) {
  const auto d = static_cast<float>(decay), s = static_cast<float>(step);
  float* p = param.data<float>();
  const float* o = orth.data<float>();
  parallel_for(param.numel(), kGrain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const float decayed = p[i] * d;
      p[i] = decayed - s * o[i];
    }
  });
}

}  // namespace

MuonMomentumImpl muon_momentum_impl_cpu() { return {"muon_momentum_cpu", Device::cpu, nullptr, momentum_cpu, nullptr}; }
MuonApplyImpl muon_apply_impl_cpu() { return {"muon_apply_cpu", Device::cpu, nullptr, apply_cpu, nullptr}; }

}  // namespace titan::ops
