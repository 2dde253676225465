// AdamW: case list for the shared harness (every kernel against the reference over several
// steps), values from math, and argument errors. The torch comparison of the whole optimizer
// lives in tests/unit/train/optim_test.cpp.
#include "titan/ops/adamw/adamw.h"

#include <cmath>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

// Flat element counts: odd, below, at and past multiples of the 16-lane vector; one 3-D case;
// the last is big enough to be split over threads at a boundary that is not a multiple of 16.
const Shape kCases[] = {{1},     {7},      {15},      {16},      {17},       {3, 11},
                        {4, 33}, {2, 129}, {2, 3, 5}, {64, 128}, {37, 1001}, {3, 40961}};

std::string name(const Shape& s) { return "shape=" + shape_str(s); }

// Moments in f32 after a few identical steps agree to a few ulp; param moves by ~lr per step,
// so its error is relative to that scale too.
constexpr Tolerance kStepTol{1e-6, 1e-5};

// Five steps from zero moments, a different gradient each step (step 3 with a few large and tiny
// values) and a different lr; the state after every step is compared.
Outputs adamw_steps(const AdamWImpl& impl, const Shape& s) {
  Tensor p = random_f32(s, 1), m = Tensor::zeros(s), v = Tensor::zeros(s);
  const double lrs[] = {1e-2, 3e-3, 1e-3, 0.1, 5e-4};
  Outputs out;
  for (int64_t step = 1; step <= 5; ++step) {
    const Tensor g = random_f32(s, 100 + static_cast<uint64_t>(step), step == 3 ? 50.0f : 1.0f);
    AdamWArgs args;
    args.lr = lrs[step - 1];
    args.beta1 = 0.9;
    args.beta2 = 0.95;
    args.eps = 1e-8;
    args.weight_decay = 0.1;
    args.step = step;
    impl.forward(p, g, m, v, args);
    const std::string at = str("step=", step, " ");
    out.insert(out.end(),
               {{at + "exp_avg", m, kStepTol}, {at + "exp_avg_sq", v, kStepTol}, {at + "param", p, kStepTol}});
  }
  return out;
}

// An optimizer step is never differentiated: forward mode only.
OpTest<AdamWImpl, Shape> adamw_test() {
  return {
      .table = &adamw_table(),
      .cases = {std::begin(kCases), std::end(kCases)},
      .name = name,
      .supports = [](const AdamWImpl& impl, const Shape& s) {
        return impl.supports(random_f32(s, 1), random_f32(s, 101));
      },
      .forward = adamw_steps,
  };
}

TEST(AdamW, KernelsMatchReferenceOverSeveralSteps) { sweep(adamw_test(), {Mode::forward}); }

// One step from zero moments, by hand: m = (1-b1) g, v = (1-b2) g^2, so m_hat = g and
// sqrt(v_hat) = |g|: p' = p (1 - lr wd) - lr * g / (|g| + eps).
TEST(AdamW, FirstStepMatchesHandComputedValues) {
  const std::vector<double> p0 = {1.0, -2.0, 0.5, 0.0, 3.0};
  const std::vector<double> g0 = {0.5, -0.25, 2.0, 1e-3, 0.0};
  AdamWArgs args;
  args.lr = 0.01;
  args.beta1 = 0.9;
  args.beta2 = 0.999;
  args.eps = 1e-8;
  args.weight_decay = 0.1;
  args.step = 1;
  std::vector<double> p_want(5), m_want(5), v_want(5);
  for (int i = 0; i < 5; ++i) {
    p_want[i] = p0[i] * (1.0 - 0.01 * 0.1) - 0.01 * g0[i] / (std::fabs(g0[i]) + 1e-8);
    m_want[i] = 0.1 * g0[i];
    v_want[i] = 0.001 * g0[i] * g0[i];
  }
  for (const AdamWImpl& impl : adamw_table().impls()) {
    Tensor p = from_doubles(p0, {5}), m = Tensor::zeros({5}), v = Tensor::zeros({5});
    impl.forward(p, from_doubles(g0, {5}), m, v, args);
    EXPECT_TRUE(all_close(impl.name + " param", to_doubles(p), p_want, kF32Tol));
    EXPECT_TRUE(all_close(impl.name + " exp_avg", to_doubles(m), m_want, kF32Tol));
    EXPECT_TRUE(all_close(impl.name + " exp_avg_sq", to_doubles(v), v_want, kF32Tol));
  }
}

TEST(AdamW, RejectsBadArguments) {
  Tensor p = random_f32({2, 8}, 1), m = Tensor::zeros({2, 8}), v = Tensor::zeros({2, 8});
  const Tensor g = random_f32({2, 8}, 2), g_bad = random_f32({8, 2}, 2);
  AdamWArgs args;
  EXPECT_NE(
      error_of([&] {
        adamw_step(p, g_bad, m, v, args);
      }).find("[adamw] grad: expected contiguous f32[2, 8] (the shape of param), got f32[8, 2]"),
      std::string::npos);
  args.step = 0;
  EXPECT_NE(error_of([&] { adamw_step(p, g, m, v, args); }).find("[adamw] step: expected >= 1"),
            std::string::npos);
  args.step = 1;
  args.beta2 = 1.0;
  EXPECT_NE(error_of([&] { adamw_step(p, g, m, v, args); }).find("[adamw] betas"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
