// moe_bias_update on CPU: E is a few hundred at most, so one thread, no allocation. The sign of
// each gap is recomputed in the last pass instead of kept (the same double values: rate * sign
// is exact to recompute), and the fp64 sums run in expert order as the contract fixes.
#include "titan/ops/moe_bias/moe_bias.h"

namespace titan::ops {

static double sign_of(double gap) { return static_cast<double>((gap > 0) - (gap < 0)); }

static void moe_bias_update_cpu(const Tensor& load_E, double rate, Tensor& bias_E) {
  const int64_t e = bias_E.numel();
  const int64_t* load = load_E.data<int64_t>();
  const auto count = static_cast<double>(e);
  double mean = 0.0;
  for (int64_t j = 0; j < e; ++j) mean += static_cast<double>(load[j]);
  mean /= count;
  double delta_mean = 0.0;
  for (int64_t j = 0; j < e; ++j) delta_mean += rate * sign_of(mean - static_cast<double>(load[j])) / count;
  float* bias = bias_E.data<float>();
  for (int64_t j = 0; j < e; ++j) {
    bias[j] += static_cast<float>(rate * sign_of(mean - static_cast<double>(load[j])) - delta_mean);
  }
}

MoeBiasUpdateImpl moe_bias_update_impl_cpu() {
  return {"moe_bias_update_cpu", Device::cpu, nullptr, moe_bias_update_cpu, nullptr};
}

}  // namespace titan::ops
