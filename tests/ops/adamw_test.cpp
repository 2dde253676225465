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
// Each shape with f32 moments, and (optimizer.state_dtype bfloat16) with bf16 moments.
const Shape kShapes[] = {{1},     {7},      {15},      {16},      {17},       {3, 11},
                         {4, 33}, {2, 129}, {2, 3, 5}, {64, 128}, {37, 1001}, {3, 40961}};

struct Case {
  Shape shape;
  DType moments;
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (const DType d : {DType::f32, DType::bf16}) {
    for (const Shape& s : kShapes) out.push_back({s, d});
  }
  return out;
}

std::string name(const Case& c) { return str("shape=", shape_str(c.shape), " moments=", dtype_name(c.moments)); }

// Moments in f32 after a few identical steps agree to a few ulp; param moves by ~lr per step,
// so its error is relative to that scale too.
constexpr Tolerance kStepTol{1e-6, 1e-5};
// bf16 moments: the kernel's f32 sum and the reference's double one may round to neighbouring
// bf16 values (one ulp, 2^-8 relative), and the parameter reads them: a fraction of a step.
constexpr Tolerance kBf16StepTol{1e-5, 8e-3};

// Five steps from zero moments, a different gradient each step (step 3 with a few large and tiny
// values) and a different lr; the state after every step is compared.
Outputs adamw_steps(const AdamWImpl& impl, const Case& c) {
  const Shape& s = c.shape;
  const Tolerance tol = c.moments == DType::bf16 ? kBf16StepTol : kStepTol;
  Tensor p = random_f32(s, 1), m = Tensor::zeros(s, c.moments), v = Tensor::zeros(s, c.moments);
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
    out.insert(out.end(), {{at + "exp_avg", m.to(DType::f32), tol},
                           {at + "exp_avg_sq", v.to(DType::f32), tol},
                           {at + "param", p.clone(), tol}});
  }
  return out;
}

// An optimizer step is never differentiated: forward mode only.
OpTest<AdamWImpl, Case> adamw_test() {
  return {
      .table = &adamw_table(),
      .cases = cases(),
      .name = name,
      .supports = [](const AdamWImpl& impl, const Case& c) {
        return impl.supports(random_f32(c.shape, 1), random_f32(c.shape, 101));
      },
      .forward = adamw_steps,
  };
}

TEST(AdamW, KernelsMatchReferenceOverSeveralSteps) { sweep(adamw_test(), {Mode::forward, Mode::isa_levels}); }

// The hand-computed tests' step: the first (bias corrections 1 - beta^1), lr 0.01, beta1 0.9, eps
// 1e-8, weight decay 0.1.
AdamWArgs first_step(double beta2) {
  AdamWArgs args;
  args.lr = 0.01;
  args.beta1 = 0.9;
  args.beta2 = beta2;
  args.eps = 1e-8;
  args.weight_decay = 0.1;
  args.step = 1;
  return args;
}

// One step from zero moments, by hand: m = (1-b1) g, v = (1-b2) g^2, so m_hat = g and
// sqrt(v_hat) = |g|: p' = p (1 - lr wd) - lr * g / (|g| + eps).
TEST(AdamW, FirstStepMatchesHandComputedValues) {
  const std::vector<double> p0 = {1.0, -2.0, 0.5, 0.0, 3.0};
  const std::vector<double> g0 = {0.5, -0.25, 2.0, 1e-3, 0.0};
  const AdamWArgs args = first_step(0.999);
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

// bf16 moments: what each kernel stores is the f32 moment rounded to nearest even, and the
// parameter moves by what the stored moments give. One step from zero: m = (1-b1) g, v = (1-b2) g^2
// (rounded), p' = p (1 - lr wd) - lr / (1-b1) m / (sqrt(v / (1-b2)) + eps). bf16's exact values
// (g = 0.5, 0.25, ...) keep the roundings at exact ties or none; 0.3 needs one.
TEST(AdamW, Bf16MomentsAreStoredRoundedAndReadBack) {
  const std::vector<double> p0 = {1.0, -2.0, 0.5, 0.0, 3.0};
  const std::vector<double> g0 = {0.5, -0.25, 0.3, 1e-3, -3.0};
  const AdamWArgs args = first_step(0.95);
  const auto bf16 = [](double x) { return static_cast<double>(bf16_to_f32(f32_to_bf16(static_cast<float>(x)))); };
  std::vector<double> p_want(5), m_want(5), v_want(5);
  for (int i = 0; i < 5; ++i) {
    const float g = static_cast<float>(g0[i]);
    m_want[i] = bf16(static_cast<float>(0.1 * g));
    v_want[i] = bf16(static_cast<float>(0.05 * g * g));
    p_want[i] = p0[i] * (1.0 - 0.01 * 0.1) - 0.01 / 0.1 * m_want[i] / (std::sqrt(v_want[i] / 0.05) + 1e-8);
  }
  for (const AdamWImpl& impl : adamw_table().impls()) {
    Tensor p = from_doubles(p0, {5}), m = Tensor::zeros({5}, DType::bf16), v = Tensor::zeros({5}, DType::bf16);
    impl.forward(p, from_doubles(g0, {5}), m, v, args);
    EXPECT_EQ(to_doubles(m.to(DType::f32)), m_want) << impl.name;  // the rounding, exactly
    EXPECT_EQ(to_doubles(v.to(DType::f32)), v_want) << impl.name;
    EXPECT_TRUE(all_close(impl.name + " param", to_doubles(p), p_want, kF32Tol));
  }
  // Moments of two dtypes are refused.
  Tensor p = from_doubles(p0, {5}), m = Tensor::zeros({5}, DType::bf16), v = Tensor::zeros({5});
  EXPECT_NE(error_of([&] { adamw_step(p, from_doubles(g0, {5}), m, v, args); })
                .find("[adamw] exp_avg_sq: expected contiguous bf16[5]"),
            std::string::npos);
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
