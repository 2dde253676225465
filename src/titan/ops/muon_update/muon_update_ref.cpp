// Scalar references for Muon's elementwise passes: one plain loop each, f32 as the contract says.
#include "titan/ops/muon_update/muon_update.h"

namespace titan::ops {

static void momentum_ref(Tensor& buf, const Tensor& grad, Tensor& upd, double momentum, bool nesterov) {
  const auto m = static_cast<float>(momentum);
  float* b = buf.data<float>();
  const float* g = grad.data<float>();
  float* u = upd.data<float>();
  for (int64_t i = 0; i < grad.numel(); ++i) {
    b[i] = torch_lerp(b[i], g[i], 1.0f - m);
    u[i] = nesterov ? torch_lerp(g[i], b[i], m) : b[i];
  }
}

static void apply_ref(Tensor& param, const Tensor& orth, double decay, double step) {
  const auto d = static_cast<float>(decay), s = static_cast<float>(step);
  float* p = param.data<float>();
  const float* o = orth.data<float>();
  for (int64_t i = 0; i < param.numel(); ++i) {
    const float decayed = p[i] * d;
    p[i] = decayed - s * o[i];
  }
}

MuonMomentumImpl muon_momentum_impl_ref() { return {"muon_momentum_ref", Device::cpu, nullptr, momentum_ref, nullptr}; }
MuonApplyImpl muon_apply_impl_ref() { return {"muon_apply_ref", Device::cpu, nullptr, apply_ref, nullptr}; }

}  // namespace titan::ops
