// RMSNorm: case list for the shared harness.
#include "titan/ops/rms_norm/rms_norm.h"

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t n, d;
};
// Odd widths and non-multiples of the 16-lane vector, a single row, a wide row.
const Case kCases[] = {{1, 1}, {3, 7}, {5, 16}, {4, 33}, {17, 64}, {2, 129}, {64, 128}, {3, 1024}};

std::string name(const Case& c) { return str("n=", c.n, " d=", c.d); }

TEST(RmsNorm, ReferenceBackwardMatchesFiniteDifferences) {
  for (const Case& c : kCases) {
    if (c.n * c.d > 2000) continue;  // finite differences cost O(size^2)
    const float eps = 1e-6f;
    const auto x0 = random_doubles(c.n * c.d, 1);
    const auto w0 = random_doubles(c.d, 2, 0.5);
    const auto r = random_doubles(c.n * c.d, 3);  // loss = sum(y * r), so dy = r
    auto loss = [&](const std::vector<double>& x, const std::vector<double>& w) {
      std::vector<double> y(x.size()), rstd(c.n);
      ref::rms_norm_forward(eps, c.n, c.d, x.data(), w.data(), y.data(), rstd.data());
      return dot(y, r);
    };
    std::vector<double> y(x0.size()), rstd(c.n), dx(x0.size()), dw(c.d, 0.0);
    ref::rms_norm_forward(eps, c.n, c.d, x0.data(), w0.data(), y.data(), rstd.data());
    ref::rms_norm_backward(c.n, c.d, r.data(), x0.data(), w0.data(), rstd.data(), dx.data(), dw.data());
    EXPECT_TRUE(all_close("rms_norm_ref " + name(c) + " dx",
                          dx, numeric_gradient([&](const auto& x) { return loss(x, w0); }, x0), kFdTol));
    EXPECT_TRUE(all_close("rms_norm_ref " + name(c) + " dweight",
                          dw, numeric_gradient([&](const auto& w) { return loss(x0, w); }, w0), kFdTol));
  }
}

TEST(RmsNorm, KernelsMatchReference) {
  const RmsNormArgs args{1e-6f};
  for (const RmsNormImpl& impl : rms_norm_table().impls()) {
    for (const Case& c : kCases) {
      const Tensor x = random_f32({c.n, c.d}, 11), w = random_f32({c.d}, 12, 0.5f);
      const Tensor dy = random_f32({c.n, c.d}, 13);
      if (impl.supports && !impl.supports(x, w)) continue;
      const std::string where = impl.name + " " + name(c);
      const RmsNormImpl& ref = rms_norm_table().ref();

      Tensor y_ref = Tensor::empty(x.shape()), y = Tensor::empty(x.shape());
      RmsNormSaved saved_ref{Tensor::empty({c.n})}, saved{Tensor::empty({c.n})};
      ref.forward(args, x, w, y_ref, saved_ref);
      impl.forward(args, x, w, y, saved);
      EXPECT_TRUE(all_close(where + " y", y, y_ref, kF32Tol));

      // dweight accumulates: start both from the same non-zero values.
      Tensor dx_ref = Tensor::empty(x.shape()), dx = Tensor::empty(x.shape());
      Tensor dw_ref = random_f32({c.d}, 14), dw = dw_ref.clone();
      ref.backward(args, dy, x, w, saved_ref, dx_ref, dw_ref);
      impl.backward(args, dy, x, w, saved, dx, dw);
      EXPECT_TRUE(all_close(where + " dx", dx, dx_ref, kF32Tol));
      EXPECT_TRUE(all_close(where + " dweight", dw, dw_ref, kF32Tol));
    }
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
