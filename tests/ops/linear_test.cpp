// Linear: case list for the shared harness.
#include "titan/ops/matmul/linear.h"

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t n, in, out;
};
// Single row / single feature, odd widths, non-multiples of 16, exact multiples, wider layers.
const Case kCases[] = {{1, 1, 1},   {3, 7, 5},    {4, 17, 33},   {2, 16, 16},
                       {5, 33, 3},  {17, 64, 48}, {64, 128, 96}, {33, 129, 257}};

std::string name(const Case& c, bool bias) {
  return str("n=", c.n, " in=", c.in, " out=", c.out, bias ? " bias" : " no-bias");
}

TEST(Linear, ReferenceBackwardMatchesFiniteDifferences) {
  for (const Case& c : kCases) {
    if (c.n * c.in + c.in * c.out > 1500) continue;  // finite differences cost O(size^2)
    const auto x0 = random_doubles(c.n * c.in, 1);
    const auto w0 = random_doubles(c.out * c.in, 2, 0.5);
    const auto b0 = random_doubles(c.out, 3);
    const auto r = random_doubles(c.n * c.out, 4);  // loss = sum(y * r), so dy = r
    auto loss = [&](const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& b) {
      std::vector<double> y(c.n * c.out);
      ref::linear_forward(c.n, c.in, c.out, x.data(), w.data(), b.data(), y.data());
      return dot(y, r);
    };
    std::vector<double> dx(x0.size()), dw(w0.size(), 0.0), db(b0.size(), 0.0);
    ref::linear_backward(c.n, c.in, c.out, r.data(), x0.data(), w0.data(), dx.data(), dw.data(),
                         db.data());
    const std::string where = "linear_ref " + name(c, true);
    EXPECT_TRUE(all_close(where + " dx", dx,
                          numeric_gradient([&](const auto& x) { return loss(x, w0, b0); }, x0), kFdTol));
    EXPECT_TRUE(all_close(where + " dweight", dw,
                          numeric_gradient([&](const auto& w) { return loss(x0, w, b0); }, w0), kFdTol));
    EXPECT_TRUE(all_close(where + " dbias", db,
                          numeric_gradient([&](const auto& b) { return loss(x0, w0, b); }, b0), kFdTol));
  }
}

TEST(Linear, ReferenceComputesAKnownProduct) {
  // x = [[1, 2]], w = [[3, 4], [5, 6], [7, 8]], b = [1, 0, -1]: y = [[12, 17, 22]].
  const double x[] = {1, 2}, w[] = {3, 4, 5, 6, 7, 8}, b[] = {1, 0, -1};
  double y[3];
  ref::linear_forward<double>(1, 2, 3, x, w, b, y);
  EXPECT_EQ(y[0], 12);
  EXPECT_EQ(y[1], 17);
  EXPECT_EQ(y[2], 22);
}

TEST(Linear, KernelsMatchReference) {
  const LinearImpl& ref = linear_table().ref();
  for (const LinearImpl& impl : linear_table().impls()) {
    for (const Case& c : kCases) {
      for (const bool bias : {false, true}) {
        const Tensor x = random_f32({c.n, c.in}, 11), w = random_f32({c.out, c.in}, 12, 0.5f);
        const Tensor b = bias ? random_f32({c.out}, 13) : Tensor{};
        const Tensor dy = random_f32({c.n, c.out}, 14);
        if (impl.supports && !impl.supports(x, w, b)) continue;
        const std::string where = impl.name + " " + name(c, bias);

        Tensor y_ref = Tensor::empty({c.n, c.out}), y = Tensor::empty({c.n, c.out});
        y.fill_(123.0f);  // forward must overwrite, not accumulate
        ref.forward(x, w, b, y_ref);
        impl.forward(x, w, b, y);
        EXPECT_TRUE(all_close(where + " y", y, y_ref, kF32Tol));

        // dweight / dbias accumulate: start both from the same non-zero values.
        Tensor dx_ref = Tensor::empty(x.shape()), dx = Tensor::empty(x.shape());
        dx.fill_(123.0f);
        Tensor dw_ref = random_f32(w.shape(), 15), dw = dw_ref.clone();
        Tensor db_ref = bias ? random_f32({c.out}, 16) : Tensor{};
        Tensor db = bias ? db_ref.clone() : Tensor{};
        ref.backward(dy, x, w, dx_ref, dw_ref, db_ref);
        impl.backward(dy, x, w, dx, dw, db);
        EXPECT_TRUE(all_close(where + " dx", dx, dx_ref, kF32Tol));
        EXPECT_TRUE(all_close(where + " dweight", dw, dw_ref, kF32Tol));
        if (bias) {
          EXPECT_TRUE(all_close(where + " dbias", db, db_ref, kF32Tol));
        }

        // Without dx: the parameter gradients are the same.
        Tensor no_dx, dw2 = random_f32(w.shape(), 15);
        Tensor db2 = bias ? random_f32({c.out}, 16) : Tensor{};
        impl.backward(dy, x, w, no_dx, dw2, db2);
        EXPECT_TRUE(all_close(where + " dweight (no dx)", dw2, dw_ref, kF32Tol));
        if (bias) {
          EXPECT_TRUE(all_close(where + " dbias (no dx)", db2, db_ref, kF32Tol));
        }
      }
    }
  }
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
