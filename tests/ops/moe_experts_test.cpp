// MoE experts: case list for the shared harness (op_harness.h), plain and with the routing
// weights; plus two properties each implementation has on its own (the weighted backward equals
// the plain one on pre-weighted gradients; in place equals out of place) and bad arguments.
#include "titan/ops/moe_experts/moe_experts.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

// Rows per expert (empty experts included); the rows are the pairs of n tokens x top_k.
struct Case {
  int64_t n, top_k, d, f;
  std::vector<int64_t> counts;
  bool weighted = false;  // backward with the routing weights (the MoE block's form)
};

std::string name(const Case& c) {
  std::string s = str("n=", c.n, " k=", c.top_k, " d=", c.d, " f=", c.f, " counts=");
  for (int64_t v : c.counts) s += str(v, ",");
  return s + (c.weighted ? " weighted" : " plain");
}

struct Layout {
  Tensor offsets_E1, pair_of_row_P;
};

// Offsets from the counts; pair_of_row the pairs reversed, so that rows and pairs differ.
Layout make_layout(const Case& c) {
  const int64_t e = static_cast<int64_t>(c.counts.size()), p = c.n * c.top_k;
  EXPECT_EQ(std::accumulate(c.counts.begin(), c.counts.end(), int64_t{0}), p) << name(c);
  Layout l{Tensor::zeros({e + 1}, DType::i64), Tensor::empty({p}, DType::i32)};
  for (int64_t j = 0; j < e; ++j) {
    l.offsets_E1.data<int64_t>()[j + 1] = l.offsets_E1.data<int64_t>()[j] + c.counts[j];
  }
  for (int64_t r = 0; r < p; ++r) l.pair_of_row_P.data<int32_t>()[r] = static_cast<int32_t>(p - 1 - r);
  return l;
}

// Routing weights as the router makes them: in (0, 1].
Tensor routing_weights(const Case& c, uint64_t seed) {
  Tensor w = random_f32({c.n, c.top_k}, seed, 0.5f);
  for (int64_t i = 0; i < w.numel(); ++i) {
    w.data<float>()[i] = std::min(1.0f, std::fabs(w.data<float>()[i]) + 1e-3f);
  }
  return w;
}

// The fp64 reference of x, w1, w3, w2 (and the routing weights, when weighted), for a fixed
// layout. Weighted, forward returns the weighted rows s_r y_r, whose backward the weighted
// kernel computes (moe_experts.h). dx and dweight are written: they start from 7, which must not
// survive.
RefFunction moe_experts_reference(const Case& c) {
  const int64_t e = static_cast<int64_t>(c.counts.size()), p = c.n * c.top_k, d = c.d, f = c.f;
  const Layout l = make_layout(c);  // the lambdas keep copies (the tensors share storage)
  auto forward = [=](const std::vector<Doubles>& in) {
    const int32_t* pair_of_row = l.pair_of_row_P.data<int32_t>();
    Doubles y(p * d), gate(p * f), up(p * f);
    ref::moe_experts_forward(e, d, f, l.offsets_E1.data<int64_t>(), in[0].data(), in[1].data(),
                             in[2].data(), in[3].data(), y.data(), gate.data(), up.data());
    for (int64_t r = 0; c.weighted && r < p; ++r) {
      for (int64_t i = 0; i < d; ++i) y[r * d + i] *= in[4][pair_of_row[r]];
    }
    return y;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    const int32_t* pair_of_row = l.pair_of_row_P.data<int32_t>();
    Doubles dx(p * d, 7.0), dw1(e * f * d, 0.0), dw3(e * f * d, 0.0), dw2(e * d * f, 0.0), dweight(p, 7.0);
    ref::moe_experts_backward(e, d, f, l.offsets_E1.data<int64_t>(), dy.data(), c.weighted ? in[4].data() : nullptr,
                              c.weighted ? pair_of_row : nullptr, in[0].data(), in[1].data(),
                              in[2].data(), in[3].data(), dx.data(), dw1.data(), dw3.data(),
                              dw2.data(), c.weighted ? dweight.data() : nullptr);
    std::vector<Doubles> grads{dx, dw1, dw3, dw2};
    if (c.weighted) grads.push_back(dweight);
    return grads;
  };
  RefFunction fn{{"x", "w1", "w3", "w2"},
                 {random_doubles(p * d, 1, 0.8), random_doubles(e * f * d, 2, 0.5),
                  random_doubles(e * f * d, 3, 0.5), random_doubles(e * d * f, 4, 0.5)},
                 forward,
                 backward};
  if (c.weighted) {
    fn.names.push_back("weight");
    fn.inputs.push_back(random_doubles(p, 5));
  }
  return fn;
}

// Uneven loads, empty experts, one expert, and one case past a GEMM tile (> 256 rows for an
// expert, F > 256 columns), no rows; each plain and weighted.
const Case kShapes[] = {{1, 1, 1, 1, {1}},
                        {7, 2, 9, 5, {3, 0, 6, 5}},
                        {9, 3, 6, 7, {0, 27, 0}},
                        {33, 3, 19, 23, {10, 20, 0, 30, 39}},
                        {300, 2, 40, 300, {290, 10, 300}},
                        {0, 2, 5, 3, {0, 0}}};

std::vector<Case> cases(const std::vector<Case>& shapes) {
  std::vector<Case> all;
  for (const Case& c : shapes) {
    for (bool weighted : {false, true}) all.push_back({c.n, c.top_k, c.d, c.f, c.counts, weighted});
  }
  return all;
}

struct Inputs {
  Layout l;
  Tensor x, w1, w3, w2, weight, dy;
};
Inputs inputs(const Case& c) {
  const int64_t e = static_cast<int64_t>(c.counts.size()), p = c.n * c.top_k;
  return {make_layout(c),
          random_f32({p, c.d}, 11, 0.7f),
          random_f32({e, c.f, c.d}, 12, 0.4f),
          random_f32({e, c.f, c.d}, 13, 0.4f),
          random_f32({e, c.d, c.f}, 14, 0.4f),
          routing_weights(c, 15),
          random_f32({p, c.d}, 16)};
}

struct Grads {
  Tensor dx, dw1, dw3, dw2, dweight;
};

// dx and dweight start as garbage (written), the weight grads as random values (accumulated).
Grads make_grads(const Case& c, const Tensor& w1, bool weighted) {
  const int64_t p = c.n * c.top_k;
  return {garbage({p, c.d}), random_f32(w1.shape(), 92), random_f32(w1.shape(), 93),
          random_f32({w1.size(0), c.d, c.f}, 94), weighted ? garbage({c.n, c.top_k}) : Tensor{}};
}

OpTest<MoeExpertsImpl, Case> moe_experts_test() {
  return {
      .table = &moe_experts_table(),
      .cases = cases({std::begin(kShapes), std::end(kShapes)}),
      .name = name,
      .supports = [](const MoeExpertsImpl& impl, const Case& c) {
        const Inputs in = inputs(c);
        return impl.supports(in.x, in.w1);
      },
      .forward = [](const MoeExpertsImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor y = garbage(in.x.shape());
        MoeExpertsSaved s{garbage({in.x.size(0), c.f}), garbage({in.x.size(0), c.f})};
        impl.forward(in.x, in.l.offsets_E1, in.w1, in.w3, in.w2, y, s);
        return {{"y", y}, {"gate", s.gate_PF}, {"up", s.up_PF}};
      },
      // Each implementation's backward reads its own forward's saved activations.
      .backward = [](const MoeExpertsImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor y = Tensor::empty(in.x.shape());
        MoeExpertsSaved s;
        impl.forward(in.x, in.l.offsets_E1, in.w1, in.w3, in.w2, y, s);
        Grads g = make_grads(c, in.w1, c.weighted);
        impl.backward(in.dy, c.weighted ? in.weight : Tensor{}, c.weighted ? in.l.pair_of_row_P : Tensor{}, in.x,
                      in.l.offsets_E1, in.w1, in.w3, in.w2, s, g.dx, g.dw1, g.dw3, g.dw2, g.dweight);
        // A weight gradient sums an expert's rows (up to 300 here, terms of magnitude ~3): two fp32
        // summation orders differ by ~1e-4 where the terms cancel, above kF32Tol's atol.
        const Tolerance summed{1e-4, kF32Tol.rtol};
        Outputs out{{"dx", g.dx}, {"dw1", g.dw1, summed}, {"dw3", g.dw3, summed}, {"dw2", g.dw2, summed}};
        if (c.weighted) out.emplace_back("dweight", g.dweight);
        return out;
      },
      .reference = moe_experts_reference,
      .fd_cases = cases({{3, 2, 4, 5, {2, 0, 3, 1}}, {2, 1, 3, 2, {2}}}),
  };
}

TEST(MoeExperts, ReferenceBackwardMatchesFiniteDifferences) { sweep(moe_experts_test(), {Mode::gradient}); }

TEST(MoeExperts, KernelsMatchReference) { sweep(moe_experts_test(), {Mode::forward, Mode::backward}); }

// ---- bf16 operands (moe_experts.h's rounding rule) ------------------------------------------------
// Kernel vs reference, both on the same bf16 values and rounding at the same places: they differ
// by f32 summation order, except where such a difference moves an intermediate (h, dgate, dup)
// across a bf16 rounding boundary, which changes that operand by one bf16 ulp (2^-8 relative). So
// element by element the bound is a few such flips, and the mean error, relative to the mean
// magnitude, is held near f32 noise (measured <= 2.5e-5, e.g. dw2 summing 300 rows; the bf16 - f32
// distance is ~1e-3).
constexpr Tolerance kBf16FlipTol{2e-2, 2e-2};
constexpr double kBf16MeanTol = 5e-5;

struct Bf16Run {
  Tensor y, dx, dw1, dw3, dw2, dweight;
};
Bf16Run run_experts(const MoeExpertsImpl& impl, const Case& c, const Inputs& in, DType dtype) {
  const Tensor x = in.x.to(dtype), w1 = in.w1.to(dtype), w3 = in.w3.to(dtype), w2 = in.w2.to(dtype);
  Tensor y = Tensor::empty(in.x.shape());
  MoeExpertsSaved s;
  impl.forward(x, in.l.offsets_E1, w1, w3, w2, y, s);
  Grads g = make_grads(c, in.w1, c.weighted);
  impl.backward(in.dy, c.weighted ? in.weight : Tensor{}, c.weighted ? in.l.pair_of_row_P : Tensor{}, x,
                in.l.offsets_E1, w1, w3, w2, s, g.dx, g.dw1, g.dw3, g.dw2, g.dweight);
  return {y, g.dx, g.dw1, g.dw3, g.dw2, g.dweight};
}

double mean_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = to_doubles(a), y = to_doubles(b);
  double m = 0.0;
  for (size_t i = 0; i < x.size(); ++i) m += std::abs(x[i] - y[i]);
  return x.empty() ? 0.0 : m / static_cast<double>(x.size());
}

// Inputs already bf16 values (so the f32 reference on them differs from the bf16 one only by the
// contract's intermediate roundings).
Inputs bf16_valued(Inputs in) {
  for (Tensor* t : {&in.x, &in.w1, &in.w3, &in.w2}) *t = t->to(DType::bf16).to(DType::f32);
  return in;
}

TEST(MoeExpertsBf16, KernelsMatchReference) {
  for (const Case& c : cases({std::begin(kShapes), std::end(kShapes)})) {
    const Inputs in = inputs(c);
    const Bf16Run want = run_experts(moe_experts_table().ref(), c, in, DType::bf16);
    for (const MoeExpertsImpl& impl : moe_experts_table().impls()) {
      if (impl.name == moe_experts_table().ref().name) continue;
      const Bf16Run got = run_experts(impl, c, in, DType::bf16);
      std::vector<std::tuple<const char*, const Tensor*, const Tensor*>> outs = {
          {"y", &got.y, &want.y}, {"dx", &got.dx, &want.dx}, {"dw1", &got.dw1, &want.dw1},
          {"dw3", &got.dw3, &want.dw3}, {"dw2", &got.dw2, &want.dw2}};
      if (c.weighted) outs.emplace_back("dweight", &got.dweight, &want.dweight);
      for (const auto& [what, g, w] : outs) {
        const std::string where = str(impl.name, " ", name(c), " ", what);
        EXPECT_TRUE(all_close(where, *g, *w, kBf16FlipTol));
        EXPECT_LE(mean_abs_diff(*g, *w), kBf16MeanTol * mean_abs_diff(*w, Tensor::zeros(w->shape()))) << where;
      }
    }
  }
}

// A kernel that skipped one of the roundings would sit nearer the f32 result than the bf16
// reference: on bf16-valued inputs the kernel's mean distance to the bf16 reference is a small
// fraction of the bf16 - f32 distance, for every output.
TEST(MoeExpertsBf16, RoundsLikeTheReference) {
  const Case c{33, 3, 19, 23, {10, 20, 0, 30, 39}, true};
  const Inputs in = bf16_valued(inputs(c));
  const Bf16Run want = run_experts(moe_experts_table().ref(), c, in, DType::bf16);
  const Bf16Run f32 = run_experts(moe_experts_table().ref(), c, in, DType::f32);
  for (const MoeExpertsImpl& impl : moe_experts_table().impls()) {
    const Bf16Run got = run_experts(impl, c, in, DType::bf16);
    for (const auto& [what, g, w, f] : {std::tuple{"y", &got.y, &want.y, &f32.y}, {"dx", &got.dx, &want.dx, &f32.dx},
                                        {"dw1", &got.dw1, &want.dw1, &f32.dw1},
                                        {"dw2", &got.dw2, &want.dw2, &f32.dw2},
                                        {"dweight", &got.dweight, &want.dweight, &f32.dweight}}) {
      const double to_bf16 = mean_abs_diff(*g, *w), bf16_vs_f32 = mean_abs_diff(*w, *f);
      EXPECT_GT(bf16_vs_f32, 0.0) << what;
      EXPECT_LT(to_bf16, 0.05 * bf16_vs_f32) << impl.name << " " << what;
    }
  }
}

TEST(MoeExpertsBf16, RejectsMixedDtypes) {
  const Tensor x = random_f32({6, 4}, 31).to(DType::bf16), w1 = random_f32({2, 5, 4}, 32);
  const Tensor w2 = random_f32({2, 4, 5}, 33);
  Tensor offsets = Tensor::zeros({3}, DType::i64), y = Tensor::empty({6, 4});
  offsets.data<int64_t>()[1] = 2;
  offsets.data<int64_t>()[2] = 6;
  MoeExpertsSaved s;
  EXPECT_NE(error_of([&] { moe_experts_forward(x, offsets, w1.to(DType::bf16), w1, w2, y, s); })
                .find("[moe_experts] w3: expected contiguous bf16[2, 5, 4]"),
            std::string::npos);
}

void expect_grads_close(const std::string& where, const Grads& got, const Grads& want) {
  EXPECT_TRUE(all_close(where + " dx", got.dx, want.dx, kF32Tol));
  EXPECT_TRUE(all_close(where + " dw1", got.dw1, want.dw1, kF32Tol));
  EXPECT_TRUE(all_close(where + " dw3", got.dw3, want.dw3, kF32Tol));
  EXPECT_TRUE(all_close(where + " dw2", got.dw2, want.dw2, kF32Tol));
  if (want.dweight.defined()) {
    EXPECT_TRUE(all_close(where + " dweight", got.dweight, want.dweight, kF32Tol));
  }
}

// The block's fold (moe.md): the weighted backward on g equals the plain backward on the
// weighted gradient s_r g_r, with dweight = g_r . y_r (what the weighted combine would return).
TEST(MoeExperts, WeightedBackwardEqualsPlainBackwardOfWeightedGradient) {
  const Case c{33, 3, 19, 23, {10, 20, 0, 30, 39}};
  const int64_t e = 5, p = c.n * c.top_k, d = c.d;
  const Layout l = make_layout(c);
  const Tensor x = random_f32({p, d}, 21, 0.7f), w1 = random_f32({e, c.f, d}, 22, 0.4f);
  const Tensor w3 = random_f32({e, c.f, d}, 23, 0.4f), w2 = random_f32({e, d, c.f}, 24, 0.4f);
  const Tensor weight = routing_weights(c, 25), g = random_f32({p, d}, 26);
  for (const MoeExpertsImpl& impl : moe_experts_table().impls()) {
    Tensor y = Tensor::empty({p, d});
    MoeExpertsSaved s;
    impl.forward(x, l.offsets_E1, w1, w3, w2, y, s);
    Grads folded = make_grads(c, w1, true), plain = make_grads(c, w1, true);
    impl.backward(g, weight, l.pair_of_row_P, x, l.offsets_E1, w1, w3, w2, s, folded.dx,
                  folded.dw1, folded.dw3, folded.dw2, folded.dweight);
    std::vector<double> gd = to_doubles(g), yd = to_doubles(y), dweight(p);
    for (int64_t r = 0; r < p; ++r) {
      const int32_t q = l.pair_of_row_P.data<int32_t>()[r];
      const double sr = weight.data<float>()[q];
      double acc = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        acc += gd[r * d + i] * yd[r * d + i];
        gd[r * d + i] *= sr;
      }
      dweight[q] = acc;
    }
    Tensor none;
    impl.backward(from_doubles(gd, {p, d}), Tensor{}, Tensor{}, x, l.offsets_E1, w1, w3, w2, s,
                  plain.dx, plain.dw1, plain.dw3, plain.dw2, none);
    plain.dweight = from_doubles(dweight, {c.n, c.top_k});
    expect_grads_close(impl.name + " folded vs plain", folded, plain);
  }
}

// In place (dx_PD = dy_PD, as the block calls it): the same bits as into a separate dx.
TEST(MoeExperts, InPlaceBackwardEqualsOutOfPlace) {
  const Case c{300, 2, 40, 300, {290, 10, 300}};
  const int64_t e = 3, p = c.n * c.top_k;
  const Layout l = make_layout(c);
  const Tensor x = random_f32({p, c.d}, 41, 0.7f), w1 = random_f32({e, c.f, c.d}, 42, 0.4f);
  const Tensor w3 = random_f32({e, c.f, c.d}, 43, 0.4f), w2 = random_f32({e, c.d, c.f}, 44, 0.4f);
  const Tensor weight = routing_weights(c, 45), dy = random_f32({p, c.d}, 46);
  for (const MoeExpertsImpl& impl : moe_experts_table().impls()) {
    Tensor y = Tensor::empty({p, c.d});
    MoeExpertsSaved s;
    impl.forward(x, l.offsets_E1, w1, w3, w2, y, s);
    Grads apart = make_grads(c, w1, true), in_place = make_grads(c, w1, true);
    impl.backward(dy, weight, l.pair_of_row_P, x, l.offsets_E1, w1, w3, w2, s, apart.dx,
                  apart.dw1, apart.dw3, apart.dw2, apart.dweight);
    in_place.dx = Tensor::empty({p, c.d});
    in_place.dx.copy_from(dy);
    impl.backward(in_place.dx, weight, l.pair_of_row_P, x, l.offsets_E1, w1, w3, w2, s,
                  in_place.dx, in_place.dw1, in_place.dw3, in_place.dw2, in_place.dweight);
    for (const auto& [got, want] : {std::pair{&in_place.dx, &apart.dx}, {&in_place.dw1, &apart.dw1},
                                    {&in_place.dw3, &apart.dw3}, {&in_place.dw2, &apart.dw2},
                                    {&in_place.dweight, &apart.dweight}}) {
      EXPECT_EQ(to_doubles(*got), to_doubles(*want)) << impl.name << ": in place differs";
    }
  }
}

TEST(MoeExperts, RejectsBadArguments) {
  const Tensor x = random_f32({6, 4}, 31), w1 = random_f32({2, 5, 4}, 32);
  const Tensor w2 = random_f32({2, 4, 5}, 33);
  Tensor offsets = Tensor::zeros({3}, DType::i64), y = Tensor::empty({6, 4});
  offsets.data<int64_t>()[1] = 2;
  offsets.data<int64_t>()[2] = 5;
  MoeExpertsSaved s;
  std::string msg = error_of([&] { moe_experts_forward(x, offsets, w1, w1, w2, y, s); });
  EXPECT_NE(msg.find("[moe_experts] offsets: expected rows [0, 6) split over the experts, got [0, 5)"),
            std::string::npos)
      << msg;
  offsets.data<int64_t>()[2] = 6;
  msg = error_of([&] { moe_experts_forward(x, offsets, w1, w1, w1, y, s); });
  EXPECT_NE(msg.find("[moe_experts] w2: expected contiguous f32[2, 4, 5], got f32[2, 5, 4]"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

}  // namespace
}  // namespace titan::ops
