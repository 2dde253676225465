// Contract checks and dispatch.
#include "titan/ops/muon_update/muon_update.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

static void check_f32(const char* op, const char* what, const Tensor& t, const Tensor& like) {
  TITAN_CHECK(t.dtype() == DType::f32 && t.is_contiguous() && t.numel() == like.numel() && t.device() == like.device(),
              "[", op, "] ", what, ": expected a contiguous f32 tensor of ", like.numel(), " elements on ",
              device_name(like.device()), ", got ", t.describe());
}

void check_muon_momentum(const Tensor& buf, const Tensor& grad, const Tensor& upd) {
  check_f32("muon_momentum", "grad", grad, grad);
  check_f32("muon_momentum", "buf", buf, grad);
  check_f32("muon_momentum", "upd", upd, grad);
}

void check_muon_apply(const Tensor& param, const Tensor& orth) {
  check_f32("muon_apply", "param", param, param);
  check_f32("muon_apply", "orth", orth, param);
}

OpTable<MuonMomentumImpl>& muon_momentum_table() {
  return builtin_table<MuonMomentumImpl>("muon_momentum", register_builtin_muon_momentum);
}

OpTable<MuonApplyImpl>& muon_apply_table() {
  return builtin_table<MuonApplyImpl>("muon_apply", register_builtin_muon_apply);
}

void muon_momentum(Tensor& buf, const Tensor& grad, Tensor& upd, double momentum, bool nesterov) {
  OpTimer timer("muon_momentum_forward");
  check_muon_momentum(buf, grad, upd);
  muon_momentum_table().select(grad.device(), grad).forward(buf, grad, upd, momentum, nesterov);
}

void muon_apply(Tensor& param, const Tensor& orth, double decay, double step) {
  OpTimer timer("muon_apply_forward");
  check_muon_apply(param, orth);
  muon_apply_table().select(param.device(), param).forward(param, orth, decay, step);
}

}  // namespace titan::ops
