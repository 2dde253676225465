// Muon's elementwise passes (torch.optim.Muon's _single_tensor_muon), around the Newton–Schulz
// orthogonalisation (ops/newton_schulz) of the update they produce:
//   muon_momentum  buf_N  = lerp(buf_N, grad_N, 1 - momentum)      (torch: buf.lerp_(grad, 1 - m))
//                  upd_N  = nesterov ? lerp(grad_N, buf_N, momentum) : buf_N
//   muon_apply     param_N = param_N * decay - step * orth_N        (torch: param.mul_(1 - lr wd);
//                                                                      param.add_(orth, alpha=-lr'))
// lerp(s, e, w) is torch's: s + w (e - s) when |w| < 0.5, else e - (e - s)(1 - w), in f32.
// decay = 1 - lr * weight_decay and step = the shape-adjusted lr (train/muon.h) come computed in
// double and are applied as f32. Shapes: N flat elements, any rank; f32, contiguous, one device;
// buf, grad, upd distinct (upd may not alias either); param and orth distinct.
// Optimizer steps are never differentiated: forward only (backward slots std::nullptr_t).
#pragma once

#include <cstddef>
#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Throw naming the tensor, what was found and what was expected.
void check_muon_momentum(const Tensor& buf, const Tensor& grad, const Tensor& upd);
void check_muon_apply(const Tensor& param, const Tensor& orth);

void muon_momentum(Tensor& buf, const Tensor& grad, Tensor& upd, double momentum, bool nesterov);
void muon_apply(Tensor& param, const Tensor& orth, double decay, double step);

using MuonMomentumImpl = OpImpl<bool (*)(const Tensor& grad),
                                void (*)(Tensor& buf, const Tensor& grad, Tensor& upd, double momentum, bool nesterov),
                                std::nullptr_t>;
using MuonApplyImpl = OpImpl<bool (*)(const Tensor& param),
                             void (*)(Tensor& param, const Tensor& orth, double decay, double step), std::nullptr_t>;
OpTable<MuonMomentumImpl>& muon_momentum_table();
OpTable<MuonApplyImpl>& muon_apply_table();
MuonMomentumImpl muon_momentum_impl_ref();
MuonMomentumImpl muon_momentum_impl_cpu();
MuonApplyImpl muon_apply_impl_ref();
MuonApplyImpl muon_apply_impl_cpu();

// torch's lerp in f32 (the contract's formula): both kernels call it per element.
inline float torch_lerp(float s, float e, float w) {
  return (w < 0.5f && w > -0.5f) ? s + w * (e - s) : e - (e - s) * (1.0f - w);
}

}  // namespace titan::ops
