#include "titan/core/rng.h"

#include <cmath>

namespace titan {

float Rng::normal(uint64_t index) const {
  const double u1 = (static_cast<double>(bits(2 * index) >> 11) + 1.0) * 0x1p-53;  // (0, 1]
  const double u2 = static_cast<double>(bits(2 * index + 1) >> 11) * 0x1p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

void Rng::fill_normal(float* out, int64_t n, float mean, float std) const {
  for (int64_t i = 0; i < n; ++i) out[i] = mean + std * normal(static_cast<uint64_t>(i));
}

void Rng::fill_uniform(float* out, int64_t n, float bound) const {
  for (int64_t i = 0; i < n; ++i) out[i] = bound * (2.0f * uniform(static_cast<uint64_t>(i)) - 1.0f);
}

void Rng::fill_int(int64_t* out, int64_t n, int64_t high) const {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int64_t>(bits(static_cast<uint64_t>(i)) % static_cast<uint64_t>(high));
}

}  // namespace titan
