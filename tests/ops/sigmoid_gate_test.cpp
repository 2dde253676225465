// The sigmoid gate: per-feature gates (output-gated attention) and one gate per row (the shared
// expert), against the reference and finite differences, and values from math.
#include "titan/ops/sigmoid_gate/sigmoid_gate.h"

#include <cmath>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t rows, features, gates;
};

std::vector<Case> cases() {
  return {{1, 1, 1}, {3, 7, 7}, {5, 16, 1}, {4, 33, 3}, {17, 64, 64}, {64, 128, 1}, {300, 256, 256}, {7, 96, 4}};
}

std::string name(const Case& c) { return str("N=", c.rows, " F=", c.features, " G=", c.gates); }

RefFunction reference(const Case& c) {
  const int64_t nx = c.rows * c.features, ng = c.rows * c.gates;
  auto forward = [=](const std::vector<Doubles>& in) {
    Doubles y(nx);
    ref::sigmoid_gate_forward(c.rows, c.features, c.gates, in[0].data(), in[1].data(), y.data());
    return y;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    Doubles dx(nx), dg(ng);
    ref::sigmoid_gate_backward(c.rows, c.features, c.gates, dy.data(), in[0].data(), in[1].data(), dx.data(),
                               dg.data());
    return std::vector<Doubles>{dx, dg};
  };
  return {{"x", "gate"}, {random_doubles(nx, 1), random_doubles(ng, 2, 3.0)}, forward, backward};
}

OpTest<SigmoidGateImpl, Case> sigmoid_gate_test() {
  return {
      .table = &sigmoid_gate_table(),
      .cases = cases(),
      .name = name,
      .forward = [](const SigmoidGateImpl& impl, const Case& c) -> Outputs {
        Tensor y = garbage({c.rows, c.features});
        impl.forward(random_f32({c.rows, c.features}, 41), random_f32({c.rows, c.gates}, 42, 3.0f), y);
        return {{"y", y}};
      },
      .backward = [](const SigmoidGateImpl& impl, const Case& c) -> Outputs {
        Tensor dx = garbage({c.rows, c.features}), dg = garbage({c.rows, c.gates});
        impl.backward(random_f32({c.rows, c.features}, 43), random_f32({c.rows, c.features}, 41),
                      random_f32({c.rows, c.gates}, 42, 3.0f), dx, dg);
        return {{"dx", dx}, {"dgate", dg}};
      },
      .threads = {1, 2},
      .reference = reference,
      .fd_cases = {{3, 7, 7}, {4, 12, 3}, {5, 16, 1}},
  };
}

TEST(SigmoidGate, ReferenceBackwardMatchesFiniteDifferences) { sweep(sigmoid_gate_test(), {Mode::gradient}); }

TEST(SigmoidGate, KernelsMatchReference) { sweep(sigmoid_gate_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

// sigmoid(0) = 1/2, sigmoid(ln 3) = 3/4; dgate = s (1 - s) (dy . x) over the group.
TEST(SigmoidGate, MatchesHandComputedValues) {
  const Tensor x = from_doubles({2, 4, 8, 16}, {1, 4}), gate = from_doubles({0.0, std::log(3.0)}, {1, 2});
  Tensor y = Tensor::empty({1, 4}), dx = Tensor::empty({1, 4}), dg = Tensor::empty({1, 2});
  sigmoid_gate_forward(x, gate, y);
  EXPECT_TRUE(all_close("y", to_doubles(y), {1, 2, 6, 12}, kF32Tol));
  sigmoid_gate_backward(from_doubles({1, 1, 1, 1}, {1, 4}), x, gate, dx, dg);
  EXPECT_TRUE(all_close("dx", to_doubles(dx), {0.5, 0.5, 0.75, 0.75}, kF32Tol));
  EXPECT_TRUE(all_close("dgate", to_doubles(dg), {0.25 * 6, 0.1875 * 24}, kF32Tol));
}

TEST(SigmoidGate, GatesThatDoNotDivideTheFeaturesAreAnError) {
  const Tensor x = Tensor::zeros({2, 6}), gate = Tensor::zeros({2, 4});
  Tensor y = Tensor::empty({2, 6});
  EXPECT_NE(error_of([&] { sigmoid_gate_forward(x, gate, y); })
                .find("[sigmoid_gate] gate: expected contiguous f32[2, G] with G dividing 6, got f32[2, 4]"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
