// SwiGLU: case list for the shared harness, plus values from math and a bad-shape error.
#include "titan/ops/swiglu/swiglu.h"

#include <cmath>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

// Flat element counts that are odd, below, at and past multiples of the 16-lane vector, as
// [N, F]; the op ignores rank, so one 3-D case too; the last is big enough to be split over
// threads at a boundary that is not a multiple of 16.
const Shape kCases[] = {{1, 1},    {3, 7},     {5, 16},   {4, 33},   {17, 64},
                        {2, 129},  {64, 128},  {3, 1024}, {2, 3, 5}, {37, 1001}};

std::string name(const Shape& s) { return "shape=" + shape_str(s); }

TEST(Swiglu, ReferenceBackwardMatchesFiniteDifferences) {
  for (const Shape& s : kCases) {
    const int64_t n = shape_numel(s);
    if (n > 600) continue;  // finite differences cost O(size^2)
    const auto g0 = random_doubles(n, 1, 2.0), u0 = random_doubles(n, 2);
    const auto r = random_doubles(n, 3);  // loss = sum(h * r), so dh = r
    auto loss = [&](const std::vector<double>& g, const std::vector<double>& u) {
      std::vector<double> h(n);
      ref::swiglu_forward(n, g.data(), u.data(), h.data());
      return dot(h, r);
    };
    std::vector<double> dg(n), du(n);
    ref::swiglu_backward(n, r.data(), g0.data(), u0.data(), dg.data(), du.data());
    EXPECT_TRUE(all_close("swiglu_ref " + name(s) + " dgate", dg,
                          numeric_gradient([&](const auto& g) { return loss(g, u0); }, g0), kFdTol));
    EXPECT_TRUE(all_close("swiglu_ref " + name(s) + " dup", du,
                          numeric_gradient([&](const auto& u) { return loss(g0, u); }, u0), kFdTol));
  }
}

void expect_impl_matches_ref(const SwigluImpl& impl, const Shape& s, const Tensor& gate,
                             const std::string& label) {
  const Tensor up = random_f32(s, 12), dh = random_f32(s, 13);
  const std::string where = impl.name + " " + label;
  const SwigluImpl& ref = swiglu_table().ref();
  Tensor h_ref = Tensor::empty(s), h = Tensor::empty(s);
  ref.forward(gate, up, h_ref);
  impl.forward(gate, up, h);
  EXPECT_TRUE(all_close(where + " h", h, h_ref, kF32Tol));
  Tensor dg_ref = Tensor::empty(s), du_ref = Tensor::empty(s);
  Tensor dg = Tensor::empty(s), du = Tensor::empty(s);
  ref.backward(dh, gate, up, dg_ref, du_ref);
  impl.backward(dh, gate, up, dg, du);
  EXPECT_TRUE(all_close(where + " dgate", dg, dg_ref, kF32Tol));
  EXPECT_TRUE(all_close(where + " dup", du, du_ref, kF32Tol));
}

TEST(Swiglu, KernelsMatchReference) {
  for (const SwigluImpl& impl : swiglu_table().impls()) {
    for (const Shape& s : kCases) {
      const Tensor gate = random_f32(s, 11, 3.0f);
      if (impl.supports && !impl.supports(gate, gate)) continue;
      expect_impl_matches_ref(impl, s, gate, name(s));
    }
  }
}

// Large |gate|, where a naive 1 / (1 + exp(-g)) overflows exp for g << 0 and exp16 saturates or
// flushes: results must stay finite and match the double reference.
TEST(Swiglu, KernelsMatchReferenceAtLargeGate) {
  const float values[] = {0.0f, 1e-3f, -1e-3f, 20.0f, -20.0f, 87.0f, -87.0f, 88.5f, -88.5f,
                          100.0f, -100.0f, 1e4f, -1e4f, 1e30f, -1e30f, 15.0f, -15.0f};
  const int64_t n = sizeof(values) / sizeof(values[0]);
  Tensor gate = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) gate.data<float>()[i] = values[i];
  for (const SwigluImpl& impl : swiglu_table().impls()) {
    expect_impl_matches_ref(impl, {n}, gate, "large gate");
    Tensor up = Tensor::empty({n}), h = Tensor::empty({n});
    up.fill_(1.0f);
    impl.forward(gate, up, h);
    for (int64_t i = 0; i < n; ++i) EXPECT_TRUE(std::isfinite(h.data<float>()[i])) << impl.name << " g=" << values[i];
  }
}

// silu(g) = g / (1 + e^-g) and its derivative s * (1 + g * (1 - s)), from Python's math module.
TEST(Swiglu, MatchesHandComputedValues) {
  const std::vector<double> u = {2.0, 1.0, -1.0, 3.0};
  const Tensor gate = from_doubles({1.0, -1.0, 2.5, 0.0}, {4}), up = from_doubles(u, {4});
  const Tensor dh = from_doubles({1.0, 1.0, 1.0, 1.0}, {4});
  const std::vector<double> silu = {0.7310585786300049, -0.2689414213699951, 2.3103545499468914, 0.0};
  const std::vector<double> dsilu = {0.9276705118714869, 0.07232948812851325, 1.0994011113415267, 0.5};
  std::vector<double> h_want(4), dg_want(4), du_want(4);
  for (int i = 0; i < 4; ++i) {
    h_want[i] = silu[i] * u[i];
    dg_want[i] = dsilu[i] * u[i];
    du_want[i] = silu[i];
  }
  Tensor h = Tensor::empty({4}), dg = Tensor::empty({4}), du = Tensor::empty({4});
  swiglu_forward(gate, up, h);
  swiglu_backward(dh, gate, up, dg, du);
  EXPECT_TRUE(all_close("swiglu h", to_doubles(h), h_want, kF32Tol));
  EXPECT_TRUE(all_close("swiglu dgate", to_doubles(dg), dg_want, kF32Tol));
  EXPECT_TRUE(all_close("swiglu dup", to_doubles(du), du_want, kF32Tol));
}

TEST(Swiglu, RejectsMismatchedUp) {
  const Tensor gate = random_f32({2, 8}, 1), up = random_f32({2, 7}, 2);
  Tensor h = Tensor::empty({2, 8});
  try {
    swiglu_forward(gate, up, h);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[swiglu] up: expected contiguous f32[2, 8], got f32[2, 7]"),
              std::string::npos)
        << e.what();
  }
  Tensor dg = Tensor::empty({2, 8}), du = Tensor::empty({8, 2});
  EXPECT_THROW(swiglu_backward(gate, gate, gate, dg, du), Error);
}

}  // namespace
}  // namespace titan::ops
