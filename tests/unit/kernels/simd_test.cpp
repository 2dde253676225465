#include "titan/kernels/cpu/simd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace titan::kernels {
namespace {

template <class V>
float lane(V v, int i) {
  float lanes[kLanes];
  store16(lanes, v);
  return lanes[i];
}

template <class V>
void expect_exp_matches_libm() {
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    const float got = lane(exp16(splat16<V>(x)), 11);
    const double want = std::exp(static_cast<double>(x));
    EXPECT_LE(std::fabs(got - want) / want, 4e-7) << "x=" << x;
  }
  EXPECT_EQ(lane(exp16(splat16<V>(-200.0f)), 0), 0.0f);
  EXPECT_EQ(lane(exp16(splat16<V>(0.0f)), 9), 1.0f);
  // Above ~88.38 the input is clamped: a finite ~2.4e38, never inf or NaN.
  const float top = lane(exp16(splat16<V>(std::numeric_limits<float>::infinity())), 15);
  EXPECT_GT(top, 2.4e38f);
  EXPECT_EQ(top, lane(exp16(splat16<V>(100.0f)), 4));
}

TEST(Simd, ExpMatchesLibmWithinFewUlp) {
  expect_exp_matches_libm<f32x16_v4>();
  expect_exp_matches_libm<f32x16_v3>();
}

template <class V>
void expect_horizontal_sum_and_max() {
  float x[kLanes];
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>((i * 7) % 16);
  const V v = load16<V>(x);
  EXPECT_EQ(hsum16(v), 120.0f);
  EXPECT_EQ(hmax16(v), 15.0f);
}

TEST(Simd, HorizontalSumAndMax) {
  expect_horizontal_sum_and_max<f32x16_v4>();
  expect_horizontal_sum_and_max<f32x16_v3>();
}

// Softmax-like row work through every helper: max, exp, masked tail, select, partial loads.
TITAN_SIMD_KERNEL(static void, helpers_row, (const float* x, int64_t n, float* out), (x, n, out)) {
  f32x16 vmax = splat16<f32x16>(-std::numeric_limits<float>::infinity());
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) vmax = max16(vmax, load16<f32x16>(x + i));
  const float m = hmax16(vmax);
  f32x16 sum = {};
  for (i = 0; i + kLanes <= n; i += kLanes) {
    const f32x16 e = exp16(load16<f32x16>(x + i) - m);
    const f32x16 v = select(e > 0.25f, e * 2.0f, -e / 3.0f);
    store16(out + i, v);
    sum += v;
  }
  const f32x16 tail = keep_first(load16_partial<f32x16>(x + i, n - i), n - i, -1.5f);
  store16_partial(out + i, tail, n - i);
  out[n] = hsum16(sum) + hsum16(tail);
}

// The two instantiations of one kernel give the same bits (the contract of TITAN_SIMD_KERNEL);
// each half of the v3 type is lowered on its own path, so a lane mix-up or a different
// operation order there fails this.
TEST(Simd, BothIsaLevelsGiveTheSameBits) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 4.0f);
  for (int64_t n : {16, 37, 160, 1001}) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = dist(rng);
    std::vector<float> v3(static_cast<size_t>(n) + 1), want(static_cast<size_t>(n) + 1);
    helpers_row_v3(x.data(), n, v3.data());
    // The expected values lane by lane, in plain scalar code.
    float m = -std::numeric_limits<float>::infinity();
    const int64_t whole = n - n % kLanes;
    for (int64_t i = 0; i < whole; ++i) m = std::max(m, x[i]);
    for (int64_t i = 0; i < whole; ++i) {
      const float e = lane(exp16(splat16<f32x16_v3>(x[i] - m)), 0);
      want[i] = e > 0.25f ? e * 2.0f : -e / 3.0f;
    }
    for (int64_t i = whole; i < n; ++i) want[i] = x[i];
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(v3[i], want[i]) << "n=" << n << " i=" << i;
    std::vector<float> dispatched(static_cast<size_t>(n) + 1);
    helpers_row(x.data(), n, dispatched.data());  // whichever this CPU runs
    for (int64_t i = 0; i <= n; ++i) EXPECT_EQ(dispatched[i], v3[i]) << "n=" << n << " i=" << i;
#ifndef TITAN_BASELINE_ONLY
    if (!simd_v4()) continue;
    std::vector<float> v4(static_cast<size_t>(n) + 1);
    helpers_row_v4(x.data(), n, v4.data());
    for (int64_t i = 0; i <= n; ++i) EXPECT_EQ(v4[i], v3[i]) << "n=" << n << " i=" << i;
#endif
  }
}

// fmadd / fmsub / fnmadd on 16 lanes: out[0..16) = a*b + c, [16..32) = a*b - c, [32..48) = c - a*b.
TITAN_SIMD_KERNEL(static void, fused_lanes, (const float* a, const float* b, const float* c, float* out),
                  (a, b, c, out)) {
  const f32x16 va = load16<f32x16>(a), vb = load16<f32x16>(b), vc = load16<f32x16>(c);
  store16(out, fmadd(va, vb, vc));
  store16(out + 16, fmsub(va, vb, vc));
  store16(out + 32, fnmadd(va, vb, vc));
}

// One rounding, as std::fma (a product rounded before the add fails it: the inputs are drawn so
// that many lanes round differently), in both instantiations.
TEST(Simd, FusedMultiplyAddsRoundOnce) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  int64_t unfused_differs = 0;
  for (int rep = 0; rep < 64; ++rep) {
    float a[kLanes], b[kLanes], c[kLanes];
    for (int i = 0; i < 16; ++i) a[i] = dist(rng), b[i] = dist(rng), c[i] = dist(rng);
    std::vector<void (*)(const float*, const float*, const float*, float*)> levels = {fused_lanes_v3, fused_lanes};
#ifndef TITAN_BASELINE_ONLY
    if (simd_v4()) levels.push_back(fused_lanes_v4);
#endif
    for (auto* fn : levels) {
      float out[3 * kLanes];
      fn(a, b, c, out);
      for (int i = 0; i < 16; ++i) {
        EXPECT_EQ(out[i], std::fma(a[i], b[i], c[i])) << i;
        EXPECT_EQ(out[16 + i], std::fma(a[i], b[i], -c[i])) << i;
        EXPECT_EQ(out[32 + i], std::fma(-a[i], b[i], c[i])) << i;
        const volatile float product = a[i] * b[i];
        unfused_differs += out[i] != product + c[i];
      }
    }
  }
  EXPECT_GT(unfused_differs, 0);
}

TEST(Simd, KeepFirstReplacesTheLanesFromN) {
  float x[kLanes];
  for (int i = 0; i < 16; ++i) x[i] = static_cast<float>(i + 1);
  for (int64_t n : {-3, 0, 1, 7, 8, 9, 15, 16, 20}) {
    const f32x16_v3 a = keep_first(load16<f32x16_v3>(x), n, -1.0f);
    const f32x16_v4 b = keep_first(load16<f32x16_v4>(x), n, -1.0f);
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(lane(a, i), i < n ? x[i] : -1.0f) << n << " " << i;
      EXPECT_EQ(lane(b, i), i < n ? x[i] : -1.0f) << n << " " << i;
    }
  }
}

}  // namespace
}  // namespace titan::kernels
