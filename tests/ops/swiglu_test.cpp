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
const Shape kShapes[] = {{1, 1},    {3, 7},     {5, 16},   {4, 33},   {17, 64},
                         {2, 129},  {64, 128},  {3, 1024}, {2, 3, 5}, {37, 1001}};

// Large |gate|, where a naive 1 / (1 + exp(-g)) overflows exp for g << 0 and exp16 saturates or
// flushes: results must stay finite and match the reference.
const float kLargeGates[] = {0.0f, 1e-3f, -1e-3f, 20.0f, -20.0f, 87.0f, -87.0f, 88.5f, -88.5f,
                             100.0f, -100.0f, 1e4f, -1e4f, 1e30f, -1e30f, 15.0f, -15.0f};
constexpr int64_t kNumLargeGates = sizeof(kLargeGates) / sizeof(kLargeGates[0]);

struct Case {
  Shape shape;
  bool large_gate = false;  // gate = kLargeGates instead of random values
};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const Shape& s : kShapes) all.push_back({s});
  all.push_back({{kNumLargeGates}, true});
  return all;
}

std::string name(const Case& c) { return (c.large_gate ? "large gate shape=" : "shape=") + shape_str(c.shape); }

struct Inputs {
  Tensor gate, up, dh;
};
Inputs inputs(const Case& c) {
  Tensor gate = random_f32(c.shape, 11, 3.0f);
  if (c.large_gate) {
    for (int64_t i = 0; i < kNumLargeGates; ++i) gate.data<float>()[i] = kLargeGates[i];
  }
  return {gate, random_f32(c.shape, 12), random_f32(c.shape, 13)};
}

RefFunction swiglu_reference(const Case& c) {
  const int64_t n = shape_numel(c.shape);
  // The differentiable inputs: gate, up.
  auto forward = [n](const std::vector<Doubles>& in) {
    Doubles h(n);
    ref::swiglu_forward(n, in[0].data(), in[1].data(), h.data());
    return h;
  };
  auto backward = [n](const std::vector<Doubles>& in, const Doubles& dh) {
    Doubles dg(n), du(n);
    ref::swiglu_backward(n, dh.data(), in[0].data(), in[1].data(), dg.data(), du.data());
    return std::vector<Doubles>{dg, du};
  };
  return {{"gate", "up"}, {random_doubles(n, 1, 2.0), random_doubles(n, 2)}, forward, backward};
}

OpTest<SwigluImpl, Case> swiglu_test() {
  return {
      .table = &swiglu_table(),
      .cases = cases(),
      .name = name,
      .supports = [](const SwigluImpl& impl, const Case& c) {
        const Inputs in = inputs(c);
        return impl.supports(in.gate, in.up);
      },
      .forward = [](const SwigluImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor h = garbage(c.shape);
        impl.forward(in.gate, in.up, h);
        return {{"h", h}};
      },
      .backward = [](const SwigluImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor dg = garbage(c.shape), du = garbage(c.shape);
        impl.backward(in.dh, in.gate, in.up, dg, du);
        return {{"dgate", dg}, {"dup", du}};
      },
      .reference = swiglu_reference,
      .fd = {.max_elements = 1200},
  };
}

TEST(Swiglu, ReferenceBackwardMatchesFiniteDifferences) { sweep(swiglu_test(), {Mode::gradient}); }

TEST(Swiglu, KernelsMatchReference) { sweep(swiglu_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

// The reference sweep holds kernels to the reference; this holds every implementation, the
// reference included, to finite values at the large gates.
TEST(Swiglu, LargeGateStaysFinite) {
  const Case c{{kNumLargeGates}, true};
  for (const SwigluImpl& impl : swiglu_table().impls()) {
    Tensor up = Tensor::empty(c.shape), h = Tensor::empty(c.shape);
    up.fill_(1.0f);
    impl.forward(inputs(c).gate, up, h);
    for (int64_t i = 0; i < kNumLargeGates; ++i) {
      EXPECT_TRUE(std::isfinite(h.data<float>()[i])) << impl.name << " g=" << kLargeGates[i];
    }
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
