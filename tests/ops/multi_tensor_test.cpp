// Multi-tensor passes (multi_sum_squares, first_nonfinite): every kernel against the reference bit
// for bit at 1, 2 and 3 threads (multi_tensor.h says why they agree exactly), the contract's chunked
// order spelled out here, values from math, and the one-line errors.
#include "titan/ops/multi_tensor/multi_tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

constexpr int64_t kChunk = kMultiSumSquaresChunk;

// A non-finite value planted at element `index` of tensor `tensor`.
struct Poison {
  size_t tensor;
  int64_t index;
  float value;
};

struct Case {
  std::vector<Shape> shapes;
  std::vector<Poison> poisons = {};
};

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Empty lists and tensors, tensors below, at and just above one chunk, several chunks with a short
// tail, and lists whose chunks split over threads at tensor boundaries.
const std::vector<Case> kCases = {
    {{}},
    {{{0}}},
    {{{7}}},
    {{{0}, {5}, {0}}},
    {{{kChunk}}},
    {{{kChunk + 1}}},
    {{{3, 40961}, {7}, {0}, {2 * kChunk + 5}}},
    {{{5, 100003}, {1}}},
    {{{17}, {kChunk - 1}, {33, 9}}, {{1, kChunk - 2, kNaN}}},
    {{{3, 40961}, {7}, {2 * kChunk + 5}}, {{2, 2 * kChunk + 4, -kInf}, {0, 3, kNaN}}},
    {{{0}, {4}, {kChunk + 3}}, {{2, kChunk, kInf}}},
};

std::string name(const Case& c) {
  std::string s = "shapes=";
  for (const Shape& shape : c.shapes) s += shape_str(shape);
  for (const Poison& p : c.poisons) s += str(" poison xs[", p.tensor, "][", p.index, "]=", p.value);
  return s;
}

// Mixed magnitudes, so a different summation order would change low bits.
std::vector<Tensor> tensors(const Case& c) {
  std::vector<Tensor> xs;
  for (size_t t = 0; t < c.shapes.size(); ++t) {
    Tensor x = random_f32(c.shapes[t], 100 + t, 1e3f);
    for (int64_t i = 0; i < x.numel(); i += 5) x.data<float>()[i] *= 1e-4f;
    xs.push_back(x);
  }
  for (const Poison& p : c.poisons) xs[p.tensor].data<float>()[p.index] = p.value;
  return xs;
}

const std::vector<int> kThreads = {1, 2, 3};

TEST(MultiTensor, EveryImplementationIsRegistered) {
  for (const auto& names : {std::vector<std::string>{multi_sum_squares_table().ref().name,
                                                     multi_sum_squares_table().impls().back().name},
                            std::vector<std::string>{first_nonfinite_table().ref().name,
                                                     first_nonfinite_table().impls().back().name}}) {
    EXPECT_EQ(names[0].substr(names[0].size() - 4), "_ref");
    EXPECT_EQ(names[1].substr(names[1].size() - 4), "_cpu");
  }
  EXPECT_EQ(multi_sum_squares_table().impls().size(), 2u);
  EXPECT_EQ(first_nonfinite_table().impls().size(), 2u);
}

TEST(MultiTensor, SumSquaresKernelsMatchReferenceBitForBit) {
  OpTest<MultiSumSquaresImpl, Case> test{
      .table = &multi_sum_squares_table(),
      .cases = kCases,
      .name = name,
      .forward = [](const MultiSumSquaresImpl& impl, const Case& c) -> Outputs {
        return {{"sum", impl.forward(tensors(c)), kExact}};
      },
      .threads = kThreads};
  sweep(test, {Mode::forward, Mode::isa_levels});
}

TEST(MultiTensor, FirstNonfiniteKernelsMatchReference) {
  OpTest<FirstNonfiniteImpl, Case> test{
      .table = &first_nonfinite_table(),
      .cases = kCases,
      .name = name,
      .forward = [](const FirstNonfiniteImpl& impl, const Case& c) -> Outputs {
        return {{"index", static_cast<double>(impl.forward(tensors(c))), kExact}};
      },
      .threads = kThreads};
  sweep(test, {Mode::forward});
}

// The contract's order, spelled out independently: per chunk of 64K elements, lane k sums elements
// k, k + 8, ... in index order and the lanes meet as ((0+4)+(1+5))+((2+6)+(3+7)); the chunk sums
// are added to 0.0 in list order, then chunk order.
double by_hand(const std::vector<Tensor>& xs) {
  double total = 0.0;
  for (const Tensor& x : xs) {
    for (int64_t start = 0; start < x.numel(); start += kChunk) {
      const int64_t len = std::min(kChunk, x.numel() - start);
      const float* p = x.data<float>() + start;
      double lane[8] = {};
      for (int k = 0; k < 8; ++k) {
        for (int64_t i = k; i < len; i += 8) lane[k] += static_cast<double>(p[i]) * static_cast<double>(p[i]);
      }
      total += ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    }
  }
  return total;
}

TEST(MultiTensor, SumSquaresFollowsTheContractOrderAndTheMath) {
  for (const MultiSumSquaresImpl& impl : multi_sum_squares_table().impls()) {
    for (const Case& c : kCases) {
      if (!c.poisons.empty()) continue;
      const std::vector<Tensor> xs = tensors(c);
      const double got = impl.forward(xs), want = by_hand(xs);
      EXPECT_EQ(std::memcmp(&got, &want, sizeof(double)), 0) << impl.name << " " << name(c) << ": got " << got
                                                             << ", want " << want;
      long double exact = 0;
      for (const Tensor& x : xs) {
        for (int64_t i = 0; i < x.numel(); ++i) exact += static_cast<long double>(x.data<float>()[i]) * x.data<float>()[i];
      }
      EXPECT_NEAR(got, static_cast<double>(exact), 1e-13 * static_cast<double>(exact)) << impl.name << " " << name(c);
    }
    // Closed form: tensors holding 1..n, 1..m: n (n + 1) (2n + 1) / 6 + m (m + 1) (2m + 1) / 6, exact in fp64.
    std::vector<Tensor> xs;
    double want = 0;
    for (int64_t n : {int64_t{0}, int64_t{9}, kChunk + 17, int64_t{1001}}) {
      Tensor x = Tensor::empty({n});
      for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = static_cast<float>(i + 1);
      xs.push_back(x);
      want += static_cast<double>(n) * (n + 1) * (2 * n + 1) / 6;
    }
    EXPECT_EQ(impl.forward(xs), want) << impl.name;
  }
  // Through dispatch: a NaN anywhere makes the sum NaN (the caller then names the parameter).
  EXPECT_TRUE(std::isnan(multi_sum_squares(tensors(kCases[8]))));
  EXPECT_EQ(multi_sum_squares({}), 0.0);
}

TEST(MultiTensor, FirstNonfiniteNamesTheFirstTensorInListOrder) {
  for (const FirstNonfiniteImpl& impl : first_nonfinite_table().impls()) {
    for (const int threads : kThreads) {
      const ThreadCount scope(threads);
      const std::string where = str(impl.name, " threads=", threads);
      EXPECT_EQ(impl.forward({}), -1) << where;
      std::vector<Tensor> xs = {Tensor::zeros({0}), Tensor::zeros({3, 5}), Tensor::zeros({2 * kChunk + 3}),
                                Tensor::zeros({0}), Tensor::zeros({9})};
      EXPECT_EQ(impl.forward(xs), -1) << where;
      xs[4].data<float>()[8] = kNaN;  // the last element of the last tensor
      EXPECT_EQ(impl.forward(xs), 4) << where;
      xs[2].data<float>()[2 * kChunk + 2] = -kInf;  // the last element of the third chunk
      EXPECT_EQ(impl.forward(xs), 2) << where;
      xs[2].data<float>()[0] = kInf;  // a second one in the same tensor
      EXPECT_EQ(impl.forward(xs), 2) << where;
      xs[1].data<float>()[14] = kNaN;
      EXPECT_EQ(impl.forward(xs), 1) << where;
      // The largest finite float is finite.
      Tensor big = Tensor::empty({4});
      big.fill_(std::numeric_limits<float>::max());
      EXPECT_EQ(impl.forward({big}), -1) << where;
    }
  }
}

TEST(MultiTensor, RejectsBadTensorsWithOneLineErrors) {
  const std::string undefined = error_of([] { (void)multi_sum_squares({Tensor::zeros({3}), Tensor()}); });
  EXPECT_NE(undefined.find("[multi_sum_squares] xs[1]: expected a contiguous f32 tensor, got an undefined tensor. "
                           "HINT:"),
            std::string::npos)
      << undefined;
  EXPECT_EQ(undefined.find('\n'), std::string::npos);
  const Tensor cols = Tensor::zeros({4, 6}).narrow(1, 0, 3);
  EXPECT_NE(error_of([&] { (void)first_nonfinite({cols}); })
                .find("[first_nonfinite] xs[0]: expected a contiguous f32 tensor, got f32[4, 3], non-contiguous"),
            std::string::npos)
      << error_of([&] { (void)first_nonfinite({cols}); });
  EXPECT_NE(error_of([] { (void)multi_sum_squares({Tensor::zeros({2}, DType::bf16)}); })
                .find("[multi_sum_squares] xs[0]: expected a contiguous f32 tensor, got bf16[2]"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
