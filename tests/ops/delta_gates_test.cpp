// The DeltaNet gates: the harness sweep (past softplus's threshold too), finite differences, and
// values from math.
#include "titan/ops/delta_gates/delta_gates.h"

#include <cmath>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t tokens, heads;
  float a_scale = 2.0f;  // 30: many a + dt_bias past softplus's threshold of 20
};

std::vector<Case> cases() { return {{1, 1}, {3, 4}, {17, 32}, {300, 16}, {64, 7, 30.0f}}; }
std::string name(const Case& c) { return str("N=", c.tokens, " H=", c.heads, " |a|~", c.a_scale); }

struct Inputs {
  Tensor a, b, a_log, dt_bias, dg, dbeta, da_log0, ddt0;
};
Inputs inputs(const Case& c) {
  const Shape nh{c.tokens, c.heads}, h{c.heads};
  return {random_f32(nh, 51, c.a_scale), random_f32(nh, 52, 3.0f), random_f32(h, 53), random_f32(h, 54),
          random_f32(nh, 55),            random_f32(nh, 56),       random_f32(h, 57), random_f32(h, 58)};
}

RefFunction reference(const Case& c) {
  const int64_t nh = c.tokens * c.heads, h = c.heads;
  auto forward = [=](const std::vector<Doubles>& in) {
    Doubles g(nh), beta(nh);
    ref::delta_gates_forward(c.tokens, h, in[0].data(), in[1].data(), in[2].data(), in[3].data(), g.data(),
                             beta.data());
    g.insert(g.end(), beta.begin(), beta.end());
    return g;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    Doubles da(nh), db(nh), dlog(h, 0.0), ddt(h, 0.0);
    ref::delta_gates_backward(c.tokens, h, dy.data(), dy.data() + nh, in[0].data(), in[1].data(), in[2].data(),
                              in[3].data(), da.data(), db.data(), dlog.data(), ddt.data());
    return std::vector<Doubles>{da, db, dlog, ddt};
  };
  return {{"a", "b", "A_log", "dt_bias"},
          {random_doubles(nh, 1, c.a_scale), random_doubles(nh, 2, 3.0), random_doubles(h, 3), random_doubles(h, 4)},
          forward,
          backward};
}

OpTest<DeltaGatesImpl, Case> delta_gates_test() {
  return {
      .table = &delta_gates_table(),
      .cases = cases(),
      .name = name,
      .forward = [](const DeltaGatesImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor g = garbage(in.a.shape()), beta = garbage(in.a.shape());
        impl.forward(in.a, in.b, in.a_log, in.dt_bias, g, beta);
        return {{"g", g}, {"beta", beta}};
      },
      .backward = [](const DeltaGatesImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor da = garbage(in.a.shape()), db = garbage(in.a.shape());
        Tensor dlog = in.da_log0.clone(), ddt = in.ddt0.clone();  // parameter gradients accumulate
        impl.backward(in.dg, in.dbeta, in.a, in.b, in.a_log, in.dt_bias, da, db, dlog, ddt);
        return {{"da", da}, {"db", db}, {"dA_log", dlog}, {"ddt_bias", ddt}};
      },
      .threads = {1, 2},
      .reference = reference,
      .fd_cases = {{3, 4}, {5, 2, 30.0f}},
  };
}

TEST(DeltaGates, ReferenceBackwardMatchesFiniteDifferences) { sweep(delta_gates_test(), {Mode::gradient}); }

TEST(DeltaGates, KernelsMatchReference) { sweep(delta_gates_test(), {Mode::forward, Mode::backward}); }

// A_log = 0, dt_bias = 0, a = 0: g = -log 2; a = 25 (past the threshold): g = -25. b = 0: beta = 1/2.
TEST(DeltaGates, MatchesHandComputedValues) {
  const Tensor a = from_doubles({0.0, 25.0}, {2, 1}), b = from_doubles({0.0, 0.0}, {2, 1});
  const Tensor zero = from_doubles({0.0}, {1});
  Tensor g = Tensor::empty({2, 1}), beta = Tensor::empty({2, 1});
  delta_gates_forward(a, b, zero, zero, g, beta);
  EXPECT_TRUE(all_close("g", to_doubles(g), {-std::log(2.0), -25.0}, kF32Tol));
  EXPECT_TRUE(all_close("beta", to_doubles(beta), {0.5, 0.5}, kF32Tol));
}

TEST(DeltaGates, MismatchedParametersAreAnError) {
  const Tensor a = Tensor::zeros({4, 3});
  Tensor g = Tensor::empty({4, 3}), beta = Tensor::empty({4, 3});
  EXPECT_NE(error_of([&] { delta_gates_forward(a, a, Tensor::zeros({2}), Tensor::zeros({3}), g, beta); })
                .find("[delta_gates] A_log: expected contiguous f32[3], got f32[2]"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
