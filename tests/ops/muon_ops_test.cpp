// Muon's ops (newton_schulz, muon_momentum, muon_apply): kernels against the references, and the
// elementwise passes against hand-computed values. newton_schulz against torch itself is in
// tests/unit/train/muon_test.cpp (it reads the fixture file).
#include <cmath>

#include "ops/op_harness.h"
#include "titan/ops/muon_update/muon_update.h"
#include "titan/ops/newton_schulz/newton_schulz.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

Tensor orthogonalised(const NewtonSchulzImpl& impl, const Tensor& g) {
  Tensor out = garbage(g.shape());
  impl.forward(g, out, NewtonSchulzArgs{});
  return out;
}

// The CPU kernel (titan's or oneDNN's bf16 GEMM, blocked f32 sums) against the reference's
// sequential sums: the same roundings, so only one-ulp flips of bf16 intermediates differ (see
// muon_test.cpp). The small products run on oneDNN; 512 x 256's X X^T (67 MFLOP)
// on titan's AVX-512-BF16 kernel where the CPU has one. Each kernel gives the same bits on 1 and 2
// threads.
TEST(NewtonSchulz, KernelsMatchReference) {
  const std::vector<Shape> shapes = {{5, 7}, {33, 17}, {2, 9, 40}, {512, 256}};
  const NewtonSchulzImpl ref = newton_schulz_impl_ref();
  for (const Shape& shape : shapes) {
    const Tensor g = random_f32(shape, 11, 0.3f);
    const Tensor want = orthogonalised(ref, g);
    for (const NewtonSchulzImpl& impl : newton_schulz_table().impls()) {
      Tensor one, two;
      {
        const ThreadCount scope(1);
        one = orthogonalised(impl, g);
      }
      {
        const ThreadCount scope(2);
        two = orthogonalised(impl, g);
      }
      EXPECT_TRUE(all_close(impl.name + " 1 vs 2 threads", one, two, kExact));
      const double rel = relative_difference(two, want);
      std::printf("%s %s: relative difference %.2e\n", impl.name.c_str(), shape_str(shape).c_str(), rel);
      EXPECT_LE(rel, 2e-2) << impl.name << " " << shape_str(shape);  // ~1 bf16 ulp per element: 3.9e-3
    }
  }
}

// The result's rows are near-orthonormal (r <= c): X X^T = I up to Muon's deliberate spread of
// the singular values (about [0.7, 1.2] after 5 steps), whatever the input's scale.
TEST(NewtonSchulz, RowsComeOutNearlyOrthonormal) {
  for (const float scale : {1e-3f, 1.0f, 1e3f}) {
    const Tensor g = random_f32({24, 96}, 5, scale);
    const Tensor x = orthogonalised(newton_schulz_table().preferred(Device::cpu), g);
    for (int64_t i = 0; i < 24; ++i) {
      for (int64_t j = 0; j < 24; ++j) {
        double dot = 0.0;
        for (int64_t k = 0; k < 96; ++k) dot += double(x.data<float>()[i * 96 + k]) * x.data<float>()[j * 96 + k];
        if (i == j) {
          EXPECT_GT(dot, 0.4) << "scale " << scale << " row " << i;
          EXPECT_LT(dot, 1.6) << "scale " << scale << " row " << i;
        } else {
          EXPECT_LT(std::fabs(dot), 0.3) << "scale " << scale << " rows " << i << ", " << j;
        }
      }
    }
  }
}

TEST(NewtonSchulz, RejectsBadArguments) {
  Tensor v = Tensor::zeros({8}), out = Tensor::zeros({8});
  EXPECT_NE(error_of([&] { newton_schulz(v, out, {}); })
                .find("[newton_schulz] g: expected a contiguous f32 tensor [..., R, C]"),
            std::string::npos);
  Tensor g = Tensor::zeros({4, 8}), wrong = Tensor::zeros({8, 4});
  EXPECT_NE(error_of([&] { newton_schulz(g, wrong, {}); }).find("[newton_schulz] out: expected contiguous f32[4, 8]"),
            std::string::npos);
  NewtonSchulzArgs many;
  many.steps = 100;
  Tensor o = Tensor::zeros({4, 8});
  EXPECT_NE(error_of([&] { newton_schulz(g, o, many); }).find("steps: expected 0..99"), std::string::npos);
}

struct Case {
  int64_t n;
  bool nesterov;
};

OpTest<MuonMomentumImpl, Case> momentum_test() {
  return {
      .table = &muon_momentum_table(),
      .cases = {{1, true}, {17, false}, {100003, true}},
      .name = [](const Case& c) { return str("N=", c.n, c.nesterov ? " nesterov" : ""); },
      .forward = [](const MuonMomentumImpl& impl, const Case& c) -> Outputs {
        Tensor buf = random_f32({c.n}, 3), upd = garbage({c.n});
        impl.forward(buf, random_f32({c.n}, 4), upd, 0.95, c.nesterov);
        return {{"buf", buf, kExact}, {"upd", upd, kExact}};
      },
      .threads = {1, 2},
  };
}

OpTest<MuonApplyImpl, Case> apply_test() {
  return {
      .table = &muon_apply_table(),
      .cases = {{1, true}, {17, true}, {100003, true}},
      .name = [](const Case& c) { return str("N=", c.n); },
      .forward = [](const MuonApplyImpl& impl, const Case& c) -> Outputs {
        Tensor p = random_f32({c.n}, 5);
        impl.forward(p, random_f32({c.n}, 6), 1.0 - 1e-3 * 0.1, 0.0123);
        return {{"param", p, kExact}};
      },
      .threads = {1, 2},
  };
}

TEST(MuonMomentum, KernelsMatchReference) { sweep(momentum_test(), {Mode::forward}); }
TEST(MuonApply, KernelsMatchReference) { sweep(apply_test(), {Mode::forward}); }

// torch: buf.lerp_(g, 0.1) then g.lerp(buf, 0.9): buf 1, g 3 -> buf 1.2, update 3 + 0.9 (1.2 - 3) = 1.38.
TEST(MuonMomentum, IsTorchsLerpByHand) {
  for (const MuonMomentumImpl& impl : muon_momentum_table().impls()) {
    Tensor buf = from_doubles({1.0}, {1}), g = from_doubles({3.0}, {1}), upd = garbage({1});
    impl.forward(buf, g, upd, 0.9, true);
    EXPECT_FLOAT_EQ(buf.data<float>()[0], 1.2f) << impl.name;
    EXPECT_FLOAT_EQ(upd.data<float>()[0], 1.38f) << impl.name;
    impl.forward(buf, g, upd, 0.9, false);  // plain momentum: the update is the buffer
    EXPECT_FLOAT_EQ(upd.data<float>()[0], buf.data<float>()[0]) << impl.name;
  }
  Tensor buf = Tensor::zeros({3}), g = Tensor::zeros({4}), upd = Tensor::zeros({4});
  EXPECT_NE(error_of([&] { muon_momentum(buf, g, upd, 0.9, true); }).find("[muon_momentum] buf: expected a contiguous "
                                                                          "f32 tensor of 4 elements"),
            std::string::npos);
}

// param 2, orth 0.5, decay 0.99, step 0.1: 2 x 0.99 - 0.05 = 1.93.
TEST(MuonApply, DecaysThenStepsByHand) {
  for (const MuonApplyImpl& impl : muon_apply_table().impls()) {
    Tensor p = from_doubles({2.0}, {1});
    impl.forward(p, from_doubles({0.5}, {1}), 0.99, 0.1);
    EXPECT_FLOAT_EQ(p.data<float>()[0], 1.93f) << impl.name;
  }
}

}  // namespace
}  // namespace titan::ops
