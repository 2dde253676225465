// The scalar reference of moe_bias_update: moe_bias.h's formulas as written, with the deltas kept
// in a vector.
#include <vector>

#include "titan/ops/moe_bias/moe_bias.h"

namespace titan::ops {

static void moe_bias_update_ref(const Tensor& load_E, double rate, Tensor& bias_E) {
  const int64_t e = bias_E.numel();
  const int64_t* load = load_E.data<int64_t>();
  double mean = 0.0;
  for (int64_t j = 0; j < e; ++j) mean += static_cast<double>(load[j]);
  mean /= static_cast<double>(e);
  std::vector<double> delta(static_cast<size_t>(e));
  double delta_mean = 0.0;
  for (int64_t j = 0; j < e; ++j) {
    const double gap = mean - static_cast<double>(load[j]);
    delta[static_cast<size_t>(j)] = rate * static_cast<double>((gap > 0) - (gap < 0));
    delta_mean += delta[static_cast<size_t>(j)] / static_cast<double>(e);
  }
  float* bias = bias_E.data<float>();
  for (int64_t j = 0; j < e; ++j) bias[j] += static_cast<float>(delta[static_cast<size_t>(j)] - delta_mean);
}

MoeBiasUpdateImpl moe_bias_update_impl_ref() {
  return {"moe_bias_update_ref", Device::cpu, nullptr, moe_bias_update_ref, nullptr};
}

}  // namespace titan::ops
