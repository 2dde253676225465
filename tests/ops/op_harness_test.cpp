// The harness against itself: a sweep must fail when a kernel is wrong, when a kernel's outputs
// do not match the reference's by name, and when it compares nothing. Each test builds its own
// OpTable (not swiglu_table(), which the process shares) from the swiglu reference and kernels
// made to fail.
#include <gtest/gtest-spi.h>

#include <memory>

#include "ops/op_harness.h"
#include "titan/ops/swiglu/swiglu.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

// The messages of the failures fn reports, intercepted so that this test does not fail with them.
std::vector<std::string> failures_of(const std::function<void()>& fn) {
  ::testing::TestPartResultArray results;
  {
    const ::testing::ScopedFakeTestPartResultReporter intercept(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &results);
    fn();
  }
  std::vector<std::string> messages;
  for (int i = 0; i < results.size(); ++i) messages.push_back(results.GetTestPartResult(i).message());
  return messages;
}

::testing::AssertionResult one_contains(const std::vector<std::string>& messages, const std::string& part) {
  for (const std::string& m : messages) {
    if (m.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  }
  auto failure = ::testing::AssertionFailure() << "no failure message contains \"" << part << "\"; got:";
  for (const std::string& m : messages) failure << "\n  " << m;
  return failure;
}

// The reference, then `kernel` when it has a forward.
std::unique_ptr<OpTable<SwigluImpl>> table_with(SwigluImpl kernel) {
  auto table = std::make_unique<OpTable<SwigluImpl>>("swiglu_selftest");
  table->add(swiglu_impl_ref());
  if (kernel.forward != nullptr) table->add(std::move(kernel));
  return table;
}

OpTest<SwigluImpl, Shape> self_test(const OpTable<SwigluImpl>& table) {
  return {
      .table = &table,
      .cases = {{3, 7}, {17}},
      .name = [](const Shape& s) { return "shape=" + shape_str(s); },
      .forward = [](const SwigluImpl& impl, const Shape& s) -> Outputs {
        Tensor h = garbage(s);
        impl.forward(random_f32(s, 1), random_f32(s, 2), h);
        return {{"h", h}};
      },
  };
}

// The last element off by 1e-3 (past the first 16-lane vector in the [17] case).
void off_by_a_little(const Tensor& gate, const Tensor& up, Tensor& h) {
  swiglu_impl_ref().forward(gate, up, h);
  h.data<float>()[h.numel() - 1] += 1e-3f;
}

TEST(OpHarness, ReportsAWrongKernel) {
  const auto table = table_with({"swiglu_off", Device::cpu, nullptr, off_by_a_little, nullptr});
  const auto failures = failures_of([&] { sweep(self_test(*table), {Mode::forward}); });
  EXPECT_EQ(failures.size(), 2u);  // one per case
  EXPECT_TRUE(one_contains(failures, "swiglu_selftest [shape=[3, 7]] swiglu_off forward h: 1/21 elements out of"));
  EXPECT_TRUE(one_contains(failures, "first at index 20: got -0.1072"));
  EXPECT_TRUE(one_contains(failures, "swiglu_selftest [shape=[17]] swiglu_off forward h: 1/17"));
}

TEST(OpHarness, ReportsOutputsThatDoNotMatchByName) {
  const auto table = table_with(swiglu_impl_cpu());
  OpTest<SwigluImpl, Shape> t = self_test(*table);
  const auto forward = t.forward;
  t.forward = [forward](const SwigluImpl& impl, const Shape& s) -> Outputs {
    return impl.name == "swiglu_ref" ? forward(impl, s) : Outputs{{"other", 0.0, kExact}};
  };
  const auto failures = failures_of([&] { sweep(t, {Mode::forward}); });
  EXPECT_TRUE(one_contains(failures, "swiglu_cpu forward: no output named h"));
  EXPECT_TRUE(one_contains(failures, "swiglu_cpu forward: output other has no reference counterpart"));
}

TEST(OpHarness, ReportsASweepThatComparesNothing) {
  const auto table = table_with({});
  EXPECT_TRUE(one_contains(failures_of([&] { sweep(self_test(*table), {Mode::forward}); }),
                           "swiglu_selftest forward: compared nothing"));
}

}  // namespace
}  // namespace titan::ops
