// Contract checks, table and dispatch of moe_bias_update.
#include "titan/ops/moe_bias/moe_bias.h"

#include <string>

#include "titan/ops/builtin.h"

namespace titan::ops {

static std::string found(const Tensor& t) {
  return t.defined() ? t.describe() + " on " + device_name(t.device()) + (t.is_contiguous() ? "" : ", non-contiguous")
                     : std::string("an undefined tensor");
}

void check_moe_bias_update(const Tensor& load_E, const Tensor& bias_E) {
  TITAN_CHECK(bias_E.defined() && bias_E.ndim() == 1 && bias_E.dtype() == DType::f32 && bias_E.is_contiguous() &&
                  bias_E.numel() > 0,
              "[moe_bias] bias_E: expected a contiguous f32 [E] with E > 0, got ", found(bias_E),
              ". HINT: pass the router's expert_bias");
  TITAN_CHECK(load_E.defined() && load_E.ndim() == 1 && load_E.dtype() == DType::i64 && load_E.is_contiguous() &&
                  load_E.numel() == bias_E.numel() && load_E.device() == bias_E.device(),
              "[moe_bias] load_E: expected a contiguous i64 [", bias_E.numel(), "] (one per expert) on ",
              device_name(bias_E.device()), ", got ", found(load_E), ". HINT: pass the router's load");
}

// Defined with the other registrations in ops/builtin.cpp (the explicit list).
void register_builtin_moe_bias_update(OpTable<MoeBiasUpdateImpl>& table);

OpTable<MoeBiasUpdateImpl>& moe_bias_update_table() {
  return builtin_table<MoeBiasUpdateImpl>("moe_bias_update", register_builtin_moe_bias_update);
}

void moe_bias_update(const Tensor& load_E, double rate, Tensor& bias_E) {
  OpTimer timer("moe_bias_update_forward");
  check_moe_bias_update(load_E, bias_E);
  moe_bias_update_table().select(bias_E.device(), load_E, bias_E).forward(load_E, rate, bias_E);
}

}  // namespace titan::ops
