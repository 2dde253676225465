#include "titan/kernels/cpu/simd.h"

#include <gtest/gtest.h>

#include <cmath>

namespace titan::kernels {
namespace {

TEST(Simd, ExpMatchesLibmWithinFewUlp) {
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    f32x16 v = splat16(x);
    const float got = exp16(v)[3];
    const double want = std::exp(static_cast<double>(x));
    EXPECT_LE(std::fabs(got - want) / want, 4e-7) << "x=" << x;
  }
  EXPECT_EQ(exp16(splat16(-200.0f))[0], 0.0f);
  EXPECT_EQ(exp16(splat16(0.0f))[0], 1.0f);
}

TEST(Simd, HorizontalSumAndMax) {
  f32x16 v;
  for (int i = 0; i < 16; ++i) v[i] = static_cast<float>(i);
  EXPECT_EQ(hsum16(v), 120.0f);
  EXPECT_EQ(hmax16(v), 15.0f);
}

}  // namespace
}  // namespace titan::kernels
