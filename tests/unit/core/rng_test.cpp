#include "titan/core/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace titan {
namespace {

TEST(Rng, NormalHasUnitMomentsAndIsReproducible) {
  const int64_t n = 200000;
  std::vector<float> a(n), b(n);
  Rng(42).fill_normal(a.data(), n, 0.0f, 1.0f);
  Rng(42).fill_normal(b.data(), n, 0.0f, 1.0f);
  EXPECT_EQ(a, b);
  double mean = 0, var = 0;
  for (float v : a) mean += v;
  mean /= n;
  for (float v : a) var += (v - mean) * (v - mean);
  var /= n;
  // Standard errors: mean 1/sqrt(n) ~ 0.0022, variance sqrt(2/n) ~ 0.0032; allow ~5 sigma.
  EXPECT_NEAR(mean, 0.0, 0.012);
  EXPECT_NEAR(var, 1.0, 0.016);
  std::vector<float> c(16);
  Rng(43).fill_normal(c.data(), 16, 0.0f, 1.0f);
  EXPECT_NE(std::vector<float>(a.begin(), a.begin() + 16), c);
}

}  // namespace
}  // namespace titan
