// RMSNorm: the case list and runs for the shared harness (op_harness.h), plus the shape error.
#include "titan/ops/rms_norm/rms_norm.h"

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t n, d;
  float offset = 0.0f;  // 1: the zero-centred norm, x * (1 + w)
};
// Odd widths and non-multiples of the 16-lane vector, a single row, a wide row; zero-centred too.
const Case kCases[] = {{1, 1}, {3, 7}, {5, 16}, {4, 33}, {17, 64}, {2, 129}, {64, 128}, {3, 1024},
                       {4, 33, 1.0f}, {64, 128, 1.0f}};

std::string name(const Case& c) { return str("n=", c.n, " d=", c.d, c.offset != 0.0f ? " zero-centred" : ""); }

RmsNormArgs args_of(const Case& c) { return {1e-6f, c.offset}; }

struct Inputs {
  Tensor x, w, dy;
};
Inputs inputs(const Case& c) {
  return {random_f32({c.n, c.d}, 11), random_f32({c.d}, 12, 0.5f), random_f32({c.n, c.d}, 13)};
}

// The fp64 reference as a function of the differentiable inputs x and weight, for the
// finite-difference check.
RefFunction rms_norm_reference(const Case& c) {
  // The weight the formula multiplies by (offset + w); its gradient is w's.
  const auto shifted = [c](const Doubles& w) {
    Doubles out(w);
    for (double& v : out) v += c.offset;
    return out;
  };
  auto forward = [c, shifted](const std::vector<Doubles>& in) {
    Doubles y(c.n * c.d), rstd(c.n), w = shifted(in[1]);
    ref::rms_norm_forward(1e-6f, c.n, c.d, in[0].data(), w.data(), y.data(), rstd.data());
    return y;
  };
  auto backward = [c, shifted](const std::vector<Doubles>& in, const Doubles& dy) {
    Doubles y(c.n * c.d), rstd(c.n), dx(c.n * c.d), dw(c.d, 0.0), w = shifted(in[1]);
    ref::rms_norm_forward(1e-6f, c.n, c.d, in[0].data(), w.data(), y.data(), rstd.data());
    ref::rms_norm_backward(c.n, c.d, dy.data(), in[0].data(), w.data(), rstd.data(), dx.data(), dw.data());
    return std::vector<Doubles>{dx, dw};
  };
  return {{"x", "weight"}, {random_doubles(c.n * c.d, 1), random_doubles(c.d, 2, 0.5)}, forward, backward};
}

// Every run makes its inputs from the case (fixed seeds), so all implementations see the same.
OpTest<RmsNormImpl, Case> rms_norm_test() {
  return {
      .table = &rms_norm_table(),
      .cases = {std::begin(kCases), std::end(kCases)},
      .name = name,
      .supports = [](const RmsNormImpl& impl, const Case& c) {
        const Inputs in = inputs(c);
        return impl.supports(in.x, in.w);
      },
      .forward = [](const RmsNormImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor y = garbage(in.x.shape());
        RmsNormSaved saved{garbage({c.n})};
        impl.forward(args_of(c), in.x, in.w, y, saved);
        return {{"y", y}, {"rstd", saved.rstd_N}};
      },
      .backward = [](const RmsNormImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor y = Tensor::empty(in.x.shape());
        RmsNormSaved saved{Tensor::empty({c.n})};
        impl.forward(args_of(c), in.x, in.w, y, saved);
        Tensor dx = garbage(in.x.shape()), dw = random_f32({c.d}, 14);  // dweight accumulates
        impl.backward(args_of(c), in.dy, in.x, in.w, saved, dx, dw);
        return {{"dx", dx}, {"dweight", dw}};
      },
      .reference = rms_norm_reference,
      .fd = {.max_elements = 2000},
  };
}

TEST(RmsNorm, ReferenceBackwardMatchesFiniteDifferences) { sweep(rms_norm_test(), {Mode::gradient}); }

TEST(RmsNorm, KernelsMatchReference) { sweep(rms_norm_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

// The zero-centred norm with w is the plain norm with 1 + w, bit for bit (HF rounds 1 + w to f32
// first, as the kernels do).
TEST(RmsNorm, ZeroCentredIsThePlainNormOfOnePlusW) {
  const Tensor x = random_f32({6, 40}, 1), w = random_f32({40}, 2, 0.3f);
  Tensor w1 = Tensor::empty({40});
  for (int64_t j = 0; j < 40; ++j) w1.data<float>()[j] = 1.0f + w.data<float>()[j];
  for (const RmsNormImpl& impl : rms_norm_table().impls()) {
    Tensor y0 = Tensor::empty({6, 40}), y1 = Tensor::empty({6, 40});
    RmsNormSaved s0{Tensor::empty({6})}, s1{Tensor::empty({6})};
    impl.forward({1e-6f, 1.0f}, x, w, y0, s0);
    impl.forward({1e-6f, 0.0f}, x, w1, y1, s1);
    EXPECT_TRUE(all_close(impl.name, y0, y1, kExact));
  }
}

TEST(RmsNorm, RejectsMismatchedWeight) {
  const Tensor x = random_f32({2, 8}, 1), w = random_f32({7}, 2);
  Tensor y = Tensor::empty({2, 8});
  RmsNormSaved saved;
  try {
    rms_norm_forward({}, x, w, y, saved);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[rms_norm] weight: expected f32[8], got f32[7]"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace titan::ops
