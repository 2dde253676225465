// Linear: case list for the shared harness.
#include "titan/ops/matmul/linear.h"

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t n, in, out;
  bool bias;
};
// Single row / single feature, odd widths, non-multiples of 16, exact multiples, wider layers;
// each with and without a bias.
std::vector<Case> cases() {
  const Case shapes[] = {{1, 1, 1, false},   {3, 7, 5, false},    {4, 17, 33, false},   {2, 16, 16, false},
                         {5, 33, 3, false},  {17, 64, 48, false}, {64, 128, 96, false}, {33, 129, 257, false}};
  std::vector<Case> all;
  for (const Case& c : shapes) {
    all.push_back(c);
    all.push_back({c.n, c.in, c.out, true});
  }
  return all;
}

std::string name(const Case& c) {
  return str("n=", c.n, " in=", c.in, " out=", c.out, c.bias ? " bias" : " no-bias");
}

struct Inputs {
  Tensor x, w, b, dy;  // b undefined without a bias
};
Inputs inputs(const Case& c) {
  return {random_f32({c.n, c.in}, 11), random_f32({c.out, c.in}, 12, 0.5f),
          c.bias ? random_f32({c.out}, 13) : Tensor{}, random_f32({c.n, c.out}, 14)};
}

Outputs linear_backward_outputs(const LinearImpl& impl, const Case& c) {
  const Inputs in = inputs(c);
  // dweight / dbias accumulate: every run starts them from the same non-zero values.
  auto dw0 = [&] { return random_f32(in.w.shape(), 15); };
  auto db0 = [&] { return c.bias ? random_f32({c.out}, 16) : Tensor{}; };
  Tensor dx = garbage(in.x.shape()), dw = dw0(), db = db0();
  impl.backward(in.dy, in.x, in.w, dx, dw, db);
  // Without dx: the same parameter gradients.
  Tensor no_dx, dw2 = dw0(), db2 = db0();
  impl.backward(in.dy, in.x, in.w, no_dx, dw2, db2);
  Outputs out = {{"dx", dx}, {"dweight", dw}, {"dweight (no dx)", dw2}};
  if (c.bias) {
    out.push_back({"dbias", db});
    out.push_back({"dbias (no dx)", db2});
  }
  return out;
}

RefFunction linear_reference(const Case& c) {
  // The differentiable inputs: x, weight, bias.
  auto forward = [c](const std::vector<Doubles>& in) {
    Doubles y(c.n * c.out);
    ref::linear_forward(c.n, c.in, c.out, in[0].data(), in[1].data(), in[2].data(), y.data());
    return y;
  };
  auto backward = [c](const std::vector<Doubles>& in, const Doubles& dy) {
    Doubles dx(in[0].size()), dw(in[1].size(), 0.0), db(in[2].size(), 0.0);
    ref::linear_backward(c.n, c.in, c.out, dy.data(), in[0].data(), in[1].data(), dx.data(), dw.data(),
                         db.data());
    return std::vector<Doubles>{dx, dw, db};
  };
  return {{"x", "weight", "bias"},
          {random_doubles(c.n * c.in, 1), random_doubles(c.out * c.in, 2, 0.5), random_doubles(c.out, 3)},
          forward,
          backward};
}

OpTest<LinearImpl, Case> linear_test() {
  std::vector<Case> with_bias;  // the fp64 reference is checked with a bias
  for (const Case& c : cases()) {
    if (c.bias) with_bias.push_back(c);
  }
  return {
      .table = &linear_table(),
      .cases = cases(),
      .name = name,
      .supports = [](const LinearImpl& impl, const Case& c) {
        const Inputs in = inputs(c);
        return impl.supports(in.x, in.w, in.b);
      },
      .forward = [](const LinearImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor y = garbage({c.n, c.out});  // forward must overwrite, not accumulate
        impl.forward(in.x, in.w, in.b, y);
        return {{"y", y}};
      },
      .backward = linear_backward_outputs,
      .reference = linear_reference,
      .fd_cases = with_bias,
  };
}

TEST(Linear, ReferenceBackwardMatchesFiniteDifferences) { sweep(linear_test(), {Mode::gradient}); }

TEST(Linear, KernelsMatchReference) { sweep(linear_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

TEST(Linear, ReferenceComputesAKnownProduct) {
  // x = [[1, 2]], w = [[3, 4], [5, 6], [7, 8]], b = [1, 0, -1]: y = [[12, 17, 22]].
  const double x[] = {1, 2}, w[] = {3, 4, 5, 6, 7, 8}, b[] = {1, 0, -1};
  double y[3];
  ref::linear_forward<double>(1, 2, 3, x, w, b, y);
  EXPECT_EQ(y[0], 12);
  EXPECT_EQ(y[1], 17);
  EXPECT_EQ(y[2], 22);
}

TEST(Linear, FlattensLeadingDims) {
  // x [2, 3, 5] acts as 6 rows; y may be [2, 3, 4] or [6, 4].
  const Tensor x = random_f32({2, 3, 5}, 21), w = random_f32({4, 5}, 22), b = random_f32({4}, 23);
  Tensor y = Tensor::empty({2, 3, 4}), y_flat = Tensor::empty({6, 4});
  linear_forward(x, w, b, y);
  linear_forward(x.reshape({6, 5}), w, b, y_flat);
  EXPECT_TRUE(all_close("linear y [2,3,4] vs [6,4]", y.reshape({6, 4}), y_flat, {0, 0}));

  const Tensor dy = random_f32({6, 4}, 24);
  Tensor dx = Tensor::empty({2, 3, 5}), dw = Tensor::zeros({4, 5}), db = Tensor::zeros({4});
  linear_backward(dy, x, w, dx, dw, db);
  Tensor dx_ref = Tensor::empty({6, 5}), dw_ref = Tensor::zeros({4, 5}), db_ref = Tensor::zeros({4});
  linear_table().ref().backward(dy, x.reshape({6, 5}), w, dx_ref, dw_ref, db_ref);
  EXPECT_TRUE(all_close("linear dx [2,3,5]", dx.reshape({6, 5}), dx_ref, kF32Tol));
  EXPECT_TRUE(all_close("linear dweight", dw, dw_ref, kF32Tol));
  EXPECT_TRUE(all_close("linear dbias", db, db_ref, kF32Tol));
}

void expect_error(const std::function<void()>& fn, const std::string& expected) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing: " << expected;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(Linear, RejectsBadShapes) {
  const Tensor x = random_f32({2, 8}, 1), w = random_f32({3, 8}, 2);
  Tensor y = Tensor::empty({2, 3});
  expect_error([&] { linear_forward(x, random_f32({3, 7}, 2), Tensor{}, y); },
               "[linear] x: expected a contiguous f32 [..., 7] tensor, got f32[2, 8]");
  expect_error([&] { linear_forward(x, w, random_f32({4}, 3), y); },
               "[linear] bias: expected f32[3], got f32[4]");
  Tensor y_bad = Tensor::empty({2, 4});
  expect_error([&] { linear_forward(x, w, Tensor{}, y_bad); }, "[linear] y: expected");
  Tensor dx = Tensor::empty({2, 8}), dw_bad = Tensor::zeros({8, 3}), db;
  expect_error([&] { linear_backward(y, x, w, dx, dw_bad, db); },
               "[linear] dweight: expected f32[3, 8] like the weight, got f32[8, 3]");
}

}  // namespace
}  // namespace titan::ops
