// Elementwise passes (accumulate, scale, sum_squares): every registered implementation against
// the reference (bit for bit: elementwise.h says why they agree exactly), values from math, the
// summation order the contract fixes, and the one-line shape errors.
#include "titan/ops/elementwise/elementwise.h"

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

// Flat element counts: empty, 1, around the 8 fp64 accumulators and the 16-lane vector, odd
// sizes that are not multiples of 16, a 3-D case, and sizes big enough to be split over threads
// at a boundary that is not a multiple of 16.
const Shape kCases[] = {{0},      {1},      {7},        {8},        {9},      {15},
                        {16},     {17},     {31},       {3, 11},    {4, 33},  {2, 3, 5},
                        {1, 1001}, {3, 40961}, {65536 + 13}, {5, 100003}};

std::string name(const Shape& s) { return "shape=" + shape_str(s); }

// Bit-for-bit equality of two f32 tensors, with the first differing index on failure.
::testing::AssertionResult same_bits(const std::string& where, const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) {
    return ::testing::AssertionFailure() << where << ": shape " << shape_str(got.shape()) << ", want "
                                         << shape_str(want.shape());
  }
  const float* g = got.data<float>();
  const float* w = want.data<float>();
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (std::memcmp(&g[i], &w[i], sizeof(float)) != 0) {
      return ::testing::AssertionFailure() << where << ": index " << i << ": got " << g[i] << ", want " << w[i];
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult same_bits(const std::string& where, double got, double want) {
  if (std::memcmp(&got, &want, sizeof(double)) == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << where << ": got " << got << ", want " << want << " (diff "
                                       << got - want << ")";
}

// Each table holds the reference first, then the CPU kernel, which dispatch prefers (unless
// TITAN_USE_REF forces the references).
template <class Impl>
void expect_ref_then_cpu(const OpTable<Impl>& table, const std::string& op) {
  ASSERT_EQ(table.impls().size(), 2u) << op;
  EXPECT_EQ(table.ref().name, op + "_ref");
  EXPECT_EQ(table.impls()[1].name, op + "_cpu");
  if (!use_ref()) {
    EXPECT_EQ(table.preferred(Device::cpu).name, op + "_cpu");
  }
}

TEST(Elementwise, EveryImplementationIsRegistered) {
  expect_ref_then_cpu(accumulate_table(), "accumulate");
  expect_ref_then_cpu(scale_table(), "scale");
  expect_ref_then_cpu(sum_squares_table(), "sum_squares");
}

// Elementwise.h says why every implementation gives the reference's bits: kExact throughout.
// These passes are never differentiated: forward mode only.
OpTest<AccumulateImpl, Shape> accumulate_test() {
  return {
      .table = &accumulate_table(),
      .cases = {std::begin(kCases), std::end(kCases)},
      .name = name,
      .supports = [](const AccumulateImpl& impl, const Shape& s) {
        return impl.supports(random_f32(s, 1), random_f32(s, 2));
      },
      .forward = [](const AccumulateImpl& impl, const Shape& s) -> Outputs {
        Tensor a = random_f32(s, 1, 3.0f);
        impl.forward(a, random_f32(s, 2, 0.01f));
        return {{"a", a, kExact}};
      },
  };
}

TEST(Elementwise, AccumulateKernelsMatchReferenceBitForBit) { sweep(accumulate_test(), {Mode::forward, Mode::isa_levels}); }

// Sums that are exact in f32 (multiples of 1/4 far below 2^24), so the result is known from
// math: a[i] = i / 2 - 7, b[i] = 3 - i / 4 -> a + b = i / 4 - 4. Twice: accumulation adds on.
TEST(Elementwise, AccumulateIsExactElementwiseAddition) {
  for (const AccumulateImpl& impl : accumulate_table().impls()) {
    for (const Shape& s : kCases) {
      const int64_t n = shape_numel(s);
      Tensor a = Tensor::empty(s), b = Tensor::empty(s), want = Tensor::empty(s);
      for (int64_t i = 0; i < n; ++i) {
        const double x = static_cast<double>(i % 4096);
        a.data<float>()[i] = static_cast<float>(x / 2 - 7);
        b.data<float>()[i] = static_cast<float>(3 - x / 4);
        want.data<float>()[i] = static_cast<float>(2 * (3 - x / 4) + x / 2 - 7);
      }
      impl.forward(a, b);
      impl.forward(a, b);
      ASSERT_TRUE(same_bits(impl.name + " " + name(s), a, want));
    }
  }
  // Through dispatch; a and b may differ in shape (only numel matters), and a may be b.
  Tensor a = Tensor::zeros({4, 6}), b = Tensor::zeros({24});
  b.fill_(1.5f);
  accumulate(a, b);
  accumulate(a, a);
  Tensor want = Tensor::empty({4, 6});
  want.fill_(3.0f);
  EXPECT_TRUE(same_bits("dispatch", a, want));
}

struct ScaleCase {
  Shape shape;
  float factor;
};

std::vector<ScaleCase> scale_cases() {
  std::vector<ScaleCase> all;
  for (const Shape& s : kCases) {
    for (float factor : {0.3172f, -1.0f, 0.0f, 1e-30f}) all.push_back({s, factor});
  }
  return all;
}

OpTest<ScaleImpl, ScaleCase> scale_test() {
  return {
      .table = &scale_table(),
      .cases = scale_cases(),
      .name = [](const ScaleCase& c) { return name(c.shape) + " s=" + std::to_string(c.factor); },
      .supports = [](const ScaleImpl& impl, const ScaleCase& c) { return impl.supports(random_f32(c.shape, 3)); },
      .forward = [](const ScaleImpl& impl, const ScaleCase& c) -> Outputs {
        Tensor a = random_f32(c.shape, 3, 2.0f);
        impl.forward(a, c.factor);
        return {{"a", a, kExact}};
      },
  };
}

TEST(Elementwise, ScaleKernelsMatchReferenceBitForBit) { sweep(scale_test(), {Mode::forward, Mode::isa_levels}); }

// A power of two scales exactly (no overflow or subnormals at these magnitudes): a * 0.25 is the
// f32 value of a / 4.
TEST(Elementwise, ScaleByPowerOfTwoIsExact) {
  for (const ScaleImpl& impl : scale_table().impls()) {
    for (const Shape& s : kCases) {
      const Tensor a0 = random_f32(s, 4, 5.0f);
      Tensor a = a0.clone(), want = Tensor::empty(s);
      for (int64_t i = 0; i < a0.numel(); ++i) want.data<float>()[i] = a0.data<float>()[i] / 4.0f;
      impl.forward(a, 0.25f);
      ASSERT_TRUE(same_bits(impl.name + " " + name(s), a, want));
    }
  }
}

// Mixed magnitudes, so a different summation order would change low bits.
Tensor mixed_magnitudes(const Shape& s) {
  Tensor x = random_f32(s, 5, 1e3f);
  for (int64_t i = 0; i < x.numel(); i += 5) x.data<float>()[i] *= 1e-4f;
  return x;
}

OpTest<SumSquaresImpl, Shape> sum_squares_test() {
  return {
      .table = &sum_squares_table(),
      .cases = {std::begin(kCases), std::end(kCases)},
      .name = name,
      .supports = [](const SumSquaresImpl& impl, const Shape& s) { return impl.supports(mixed_magnitudes(s)); },
      .forward = [](const SumSquaresImpl& impl, const Shape& s) -> Outputs {
        return {{"sum", impl.forward(mixed_magnitudes(s)), kExact}};
      },
  };
}

TEST(Elementwise, SumSquaresKernelsMatchReferenceBitForBit) { sweep(sum_squares_test(), {Mode::forward, Mode::isa_levels}); }

// The contract's order, spelled out independently: lane k sums elements k, k + 8, ... in index
// order, the lanes meet as ((0+4)+(1+5))+((2+6)+(3+7)).
double sum_squares_by_lanes(const Tensor& x) {
  const float* p = x.data<float>();
  double lane[8] = {};
  for (int k = 0; k < 8; ++k) {
    for (int64_t i = k; i < x.numel(); i += 8) lane[k] += static_cast<double>(p[i]) * static_cast<double>(p[i]);
  }
  return ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
}

TEST(Elementwise, SumSquaresFollowsTheContractOrderInEveryImplementation) {
  for (const SumSquaresImpl& impl : sum_squares_table().impls()) {
    for (const Shape& s : kCases) {
      const Tensor x = mixed_magnitudes(s);
      ASSERT_TRUE(same_bits(impl.name + " " + name(s) + " vs lanes", impl.forward(x), sum_squares_by_lanes(x)));
    }
  }
}

// Against a plain fp64 loop in long double (a different order: equal within rounding), and
// against closed forms: sum_{i=1..n} i^2 = n (n + 1) (2n + 1) / 6, exact in fp64 here.
TEST(Elementwise, SumSquaresMatchesMath) {
  for (const SumSquaresImpl& impl : sum_squares_table().impls()) {
    for (const Shape& s : kCases) {
      const Tensor x = random_f32(s, 6, 2.0f);
      long double want = 0;
      for (int64_t i = 0; i < x.numel(); ++i) want += static_cast<long double>(x.data<float>()[i]) * x.data<float>()[i];
      const double got = impl.forward(x);
      EXPECT_NEAR(got, static_cast<double>(want), 1e-13 * static_cast<double>(want)) << impl.name << " " << name(s);
    }
    for (int64_t n : {0, 1, 7, 8, 9, 17, 1001, 65549}) {
      Tensor x = Tensor::empty({n});
      for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = static_cast<float>(i + 1);
      const double want = static_cast<double>(n) * (n + 1) * (2 * n + 1) / 6;
      EXPECT_EQ(impl.forward(x), want) << impl.name << " n=" << n;
    }
  }
  // Through dispatch, on a narrowed view (the clip.cpp use): elements [3, 3 + 10) of 1..20.
  Tensor x = Tensor::empty({20});
  for (int64_t i = 0; i < 20; ++i) x.data<float>()[i] = static_cast<float>(i + 1);
  double want = 0;
  for (int v = 4; v <= 13; ++v) want += v * v;
  EXPECT_EQ(sum_squares(x.narrow(0, 3, 10)), want);
}

TEST(Elementwise, RejectsBadTensorsWithOneLineErrors) {
  Tensor a = Tensor::zeros({4, 6});
  const Tensor b_short = Tensor::zeros({23});
  const std::string size_error = error_of([&] { accumulate(a, b_short); });
  EXPECT_NE(size_error.find("[accumulate] b: expected 24 f32 elements on cpu (those of a f32[4, 6] on cpu), "
                            "got f32[23] on cpu. HINT:"),
            std::string::npos)
      << size_error;
  EXPECT_EQ(size_error.find('\n'), std::string::npos) << size_error;

  const Tensor b_i64 = Tensor::zeros({4, 6}, DType::i64);
  EXPECT_NE(error_of([&] { accumulate(a, b_i64); })
                .find("[accumulate] b: expected a contiguous f32 tensor, got i64[4, 6] on cpu"),
            std::string::npos)
      << error_of([&] { accumulate(a, b_i64); });

  // A column slice of a row-major matrix is strided.
  Tensor cols = Tensor::zeros({4, 6}).narrow(1, 0, 3);
  const Tensor b12 = Tensor::zeros({12});
  EXPECT_NE(error_of([&] { accumulate(cols, b12); })
                .find("[accumulate] a: expected a contiguous f32 tensor, got f32[4, 3] on cpu, non-contiguous"),
            std::string::npos)
      << error_of([&] { accumulate(cols, b12); });
  EXPECT_NE(error_of([&] { scale(cols, 2.0f); }).find("[scale] a: expected a contiguous f32 tensor, got f32[4, 3]"),
            std::string::npos);
  Tensor undefined;
  EXPECT_NE(error_of([&] { scale(undefined, 2.0f); })
                .find("[scale] a: expected a contiguous f32 tensor, got an undefined tensor"),
            std::string::npos);
  const Tensor bf = Tensor::zeros({8}, DType::bf16);
  EXPECT_NE(error_of([&] { (void)sum_squares(bf); })
                .find("[sum_squares] x: expected a contiguous f32 tensor, got bf16[8]"),
            std::string::npos)
      << error_of([&] { (void)sum_squares(bf); });
}

}  // namespace
}  // namespace titan::ops
