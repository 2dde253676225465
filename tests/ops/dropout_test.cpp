// Dropout: the CPU kernel draws the reference's mask at every thread count and ISA level, the
// reference backward matches finite differences (the op is linear in x), and the mask's rate and
// scale follow from math.
#include "titan/ops/dropout/dropout.h"

#include <cmath>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t rows, cols;
  double p;
};

std::vector<Case> cases() {
  return {{1, 1, 0.5}, {3, 7, 0.1}, {5, 16, 0.0}, {4, 33, 0.25}, {17, 64, 0.9}, {300, 256, 0.05}, {1, 40000, 0.3}};
}

std::string name(const Case& c) { return str("N=", c.rows, " I=", c.cols, " p=", c.p); }

constexpr uint64_t kSeed = 7, kStream = 0x1234;

RefFunction reference(const Case& c) {
  const int64_t n = c.rows * c.cols;
  auto forward = [=](const std::vector<Doubles>& in) {
    Doubles y(n);
    ref::dropout(n, c.p, kSeed, kStream, in[0].data(), y.data());
    return y;
  };
  auto backward = [=](const std::vector<Doubles>&, const Doubles& dy) {
    Doubles dx(n);
    ref::dropout(n, c.p, kSeed, kStream, dy.data(), dx.data());
    return std::vector<Doubles>{dx};
  };
  return {{"x"}, {random_doubles(n, 1)}, forward, backward};
}

OpTest<DropoutImpl, Case> dropout_test() {
  return {
      .table = &dropout_table(),
      .cases = cases(),
      .name = name,
      .forward = [](const DropoutImpl& impl, const Case& c) -> Outputs {
        Tensor y = garbage({c.rows, c.cols});
        impl.forward(random_f32({c.rows, c.cols}, 41), DropoutArgs{c.p, kSeed, kStream}, y);
        return {{"y", y}};
      },
      .backward = [](const DropoutImpl& impl, const Case& c) -> Outputs {
        Tensor dx = garbage({c.rows, c.cols});
        impl.backward(random_f32({c.rows, c.cols}, 43), DropoutArgs{c.p, kSeed, kStream}, dx);
        return {{"dx", dx}};
      },
      .threads = {1, 2},
      .reference = reference,
      .fd_cases = {{3, 7, 0.1}, {4, 12, 0.5}},
  };
}

TEST(Dropout, ReferenceBackwardMatchesFiniteDifferences) { sweep(dropout_test(), {Mode::gradient}); }

TEST(Dropout, KernelsMatchReference) { sweep(dropout_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

// Each element is x / (1 - p) or 0; about p of them are zeroed; the same (seed, stream) draws the
// same mask and another stream another one; p = 0 is the identity.
TEST(Dropout, KeepsOneMinusPScaledAndIsAFunctionOfTheKey) {
  const int64_t n = 100000;
  const Tensor x = from_doubles(std::vector<double>(n, 2.0), {n});
  Tensor y = Tensor::empty({n}), again = Tensor::empty({n}), other = Tensor::empty({n});
  dropout_forward(x, {0.25, 3, 9}, y);
  dropout_forward(x, {0.25, 3, 9}, again);
  dropout_forward(x, {0.25, 3, 10}, other);
  int64_t zeros = 0, differ = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float v = y.data<float>()[i];
    ASSERT_TRUE(v == 0.0f || v == static_cast<float>(2.0 * static_cast<float>(1.0 / 0.75))) << v;
    zeros += v == 0.0f;
    ASSERT_EQ(v, again.data<float>()[i]);
    differ += v != other.data<float>()[i];
  }
  EXPECT_NEAR(static_cast<double>(zeros) / n, 0.25, 0.01);  // binomial sd 0.0014
  EXPECT_GT(differ, n / 4);
  dropout_forward(x, {0.0, 3, 9}, y);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y.data<float>()[i], 2.0f);
}

TEST(Dropout, BadProbabilityIsAnError) {
  const Tensor x = Tensor::zeros({2, 3});
  Tensor y = Tensor::empty({2, 3});
  EXPECT_NE(error_of([&] { dropout_forward(x, {1.0, 0, 0}, y); })
                .find("[dropout] p = 1: expected a probability in [0, 1)"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
