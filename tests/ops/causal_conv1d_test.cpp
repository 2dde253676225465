// The causal depthwise conv1d: case list for the shared harness (channels across the thread
// block, fewer tokens than taps, with and without SiLU), the state carried across calls, and
// values from math.
#include "titan/ops/causal_conv1d/causal_conv1d.h"

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t batch, tokens, channels, taps;
  bool silu = true;
};

std::vector<Case> cases() {
  return {{1, 1, 3, 4},  {1, 2, 5, 4},   {2, 9, 17, 4},        {1, 33, 64, 4}, {2, 17, 130, 4},
          {1, 8, 7, 1},  {2, 12, 6, 3, false}, {1, 50, 200, 4}};
}

std::string name(const Case& c) {
  return str("B=", c.batch, " T=", c.tokens, " C=", c.channels, " K=", c.taps, c.silu ? " silu" : "");
}

struct Inputs {
  Tensor x, w, dy, dw0;
};
Inputs inputs(const Case& c) {
  return {random_f32({c.batch, c.tokens, c.channels}, 31), random_f32({c.channels, c.taps}, 32, 0.5f),
          random_f32({c.batch, c.tokens, c.channels}, 33), random_f32({c.channels, c.taps}, 34)};
}

RefFunction reference(const Case& c) {
  const int64_t nx = c.batch * c.tokens * c.channels, nw = c.channels * c.taps;
  auto forward = [=](const std::vector<Doubles>& in) {
    Doubles y(nx);
    ref::causal_conv1d_forward(c.silu, c.batch, c.tokens, c.channels, c.taps, in[0].data(), in[1].data(), y.data(),
                               static_cast<double*>(nullptr));
    return y;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    Doubles dx(nx), dw(nw, 0.0);
    ref::causal_conv1d_backward(c.silu, c.batch, c.tokens, c.channels, c.taps, dy.data(), in[0].data(),
                                in[1].data(), dx.data(), dw.data());
    return std::vector<Doubles>{dx, dw};
  };
  return {{"x", "weight"}, {random_doubles(nx, 1), random_doubles(nw, 2, 0.5)}, forward, backward};
}

OpTest<CausalConv1dImpl, Case> causal_conv1d_test() {
  return {
      .table = &causal_conv1d_table(),
      .cases = cases(),
      .name = name,
      .forward = [](const CausalConv1dImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor y = garbage(in.x.shape()), none;
        impl.forward({c.silu}, in.x, in.w, y, none);
        return {{"y", y}};
      },
      .backward = [](const CausalConv1dImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor dx = garbage(in.x.shape()), dw = in.dw0.clone();  // dweight accumulates
        impl.backward({c.silu}, in.dy, in.x, in.w, dx, dw);
        return {{"dx", dx}, {"dweight", dw}};
      },
      .threads = {1, 2},
      .reference = reference,
      .fd_cases = {{1, 6, 3, 4}, {2, 3, 2, 4}, {1, 5, 4, 2, false}},
  };
}

TEST(CausalConv1d, ReferenceBackwardMatchesFiniteDifferences) { sweep(causal_conv1d_test(), {Mode::gradient}); }

TEST(CausalConv1d, KernelsMatchReference) { sweep(causal_conv1d_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

// Generation: a prompt, then one token at a time, with the state carrying the last K - 1 inputs,
// gives the outputs of one call over the whole sequence (also when a call has fewer tokens than
// the state holds).
TEST(CausalConv1d, StateCarriesAcrossCalls) {
  const Case c{2, 10, 70, 4};
  const Inputs in = inputs(c);
  for (const CausalConv1dImpl& impl : causal_conv1d_table().impls()) {
    Tensor whole = Tensor::empty(in.x.shape()), none;
    impl.forward({true}, in.x, in.w, whole, none);
    Tensor state = Tensor::zeros({c.batch, c.taps - 1, c.channels});
    std::vector<double> pieces(static_cast<size_t>(whole.numel()));
    for (const auto& [t0, n] : {std::pair<int64_t, int64_t>{0, 5}, {5, 1}, {6, 2}, {8, 2}}) {
      const Tensor x = in.x.narrow(1, t0, n).contiguous();
      Tensor y = Tensor::empty(x.shape());
      impl.forward({true}, x, in.w, y, state);
      for (int64_t b = 0; b < c.batch; ++b) {
        for (int64_t i = 0; i < n * c.channels; ++i) {
          pieces[static_cast<size_t>((b * c.tokens + t0) * c.channels + i)] = y.data<float>()[b * n * c.channels + i];
        }
      }
    }
    EXPECT_TRUE(all_close(impl.name + " pieces vs whole", pieces, to_doubles(whole), kF32Tol));
  }
}

// Without SiLU, taps [1, 2, 3] over x = [1, 10, 100]: y_t = 3 x_t + 2 x_{t-1} + x_{t-2}.
TEST(CausalConv1d, MatchesHandComputedValues) {
  const Tensor x = from_doubles({1, 10, 100}, {1, 3, 1}), w = from_doubles({1, 2, 3}, {1, 3});
  Tensor y = Tensor::empty({1, 3, 1}), none;
  causal_conv1d_forward({false}, x, w, y, none);
  EXPECT_TRUE(all_close("y", to_doubles(y), {3, 32, 321}, kF32Tol));
}

TEST(CausalConv1d, BadShapesAreOneLineErrors) {
  const Tensor x = Tensor::zeros({1, 4, 6}), w = Tensor::zeros({5, 4});
  Tensor y = Tensor::empty({1, 4, 6}), none;
  EXPECT_NE(error_of([&] { causal_conv1d_forward({}, x, w, y, none); })
                .find("[causal_conv1d] weight: expected contiguous f32[6, K] (one filter per channel), got f32[5, 4]"),
            std::string::npos);
  Tensor state = Tensor::zeros({1, 4, 6});
  EXPECT_NE(error_of([&] { causal_conv1d_forward({}, x, Tensor::zeros({6, 4}), y, state); })
                .find("[causal_conv1d] state: expected contiguous f32[1, 3, 6]"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
