// MoE router: the reference backward against finite differences, every kernel against the
// reference (forward and backward, with and without a selection bias and extra dlogits), ties to
// the lower expert index, and bad arguments.
#include "titan/ops/moe_router/moe_router.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct RouterCase {
  int64_t n, d, e, top_k;
  bool norm, bias;
};

std::string name(const RouterCase& c) {
  return str("n=", c.n, " d=", c.d, " e=", c.e, " k=", c.top_k, c.norm ? " norm" : " raw",
             c.bias ? " bias" : "");
}

// Smallest gap, over tokens, between the k-th and (k+1)-th largest selection key (infinite when
// top_k = E): selection is constant within this distance.
double top_k_margin(const std::vector<double>& key, int64_t n, int64_t e, int64_t top_k) {
  if (top_k == e) return INFINITY;
  double margin = INFINITY;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> z(key.begin() + t * e, key.begin() + (t + 1) * e);
    std::sort(z.begin(), z.end(), std::greater<>());
    margin = std::min(margin, z[top_k - 1] - z[top_k]);
  }
  return margin;
}

// ---- 1. reference backward vs central finite differences (fp64) ----

TEST(MoeRouter, ReferenceBackwardMatchesFiniteDifferences) {
  const RouterCase cases[] = {{3, 5, 4, 2, true, false}, {3, 5, 4, 2, false, false},
                              {4, 3, 5, 1, true, false}, {2, 4, 3, 3, true, false},  // top_k = E
                              {3, 4, 6, 2, true, true},  {2, 3, 1, 1, false, false}};
  const double h = 1e-5;
  for (const RouterCase& c : cases) {
    const int64_t n = c.n, d = c.d, e = c.e, k = c.top_k;
    const auto x0 = random_doubles(n * d, 11, 0.8), wg0 = random_doubles(e * d, 12, 0.9);
    const auto rw = random_doubles(n * k, 13), rz = random_doubles(n * e, 14);  // loss weights
    std::vector<float> bias(e);
    for (int64_t j = 0; j < e; ++j) bias[j] = c.bias ? 0.1f * static_cast<float>(j % 3) : 0.0f;
    struct Out {
      std::vector<double> logits, probs, weight;
      std::vector<int32_t> expert;
    };
    auto run = [&](const std::vector<double>& x, const std::vector<double>& wg) {
      Out o{std::vector<double>(n * e), std::vector<double>(n * e), std::vector<double>(n * k),
            std::vector<int32_t>(n * k)};
      ref::moe_router_forward(n, d, e, k, c.norm, x.data(), wg.data(),
                              c.bias ? bias.data() : nullptr, o.logits.data(), o.probs.data(),
                              o.expert.data(), o.weight.data());
      return o;
    };
    // loss = sum(weight * rw) + sum(logits * rz): dweight = rw, dlogits = rz.
    auto loss = [&](const auto& x, const auto& wg) {
      const Out o = run(x, wg);
      return dot(o.weight, rw) + dot(o.logits, rz);
    };
    const Out o = run(x0, wg0);
    std::vector<double> key = o.logits;
    if (c.bias) {
      for (int64_t i = 0; i < n * e; ++i) key[i] = o.probs[i] + bias[i % e];
    }
    EXPECT_GT(top_k_margin(key, n, e, k), 100 * h) << name(c) << ": near-tie, pick other inputs";
    std::vector<double> dx(n * d, 7.0), dwg(e * d, 0.0);  // dx is written, dw_gate accumulated
    ref::moe_router_backward(n, d, e, k, c.norm, rw.data(), rz.data(), x0.data(), wg0.data(),
                             o.probs.data(), o.expert.data(), o.weight.data(), dx.data(),
                             dwg.data());
    const std::string w = "moe_router_ref " + name(c);
    EXPECT_TRUE(all_close(w + " dx", dx, numeric_gradient([&](const auto& v) {
      return loss(v, wg0); }, x0, h), kFdTol));
    EXPECT_TRUE(all_close(w + " dw_gate", dwg, numeric_gradient([&](const auto& v) {
      return loss(x0, v); }, wg0, h), kFdTol));
  }
}

// ---- 2. every kernel vs the reference, forward and backward ----

const RouterCase kCases[] = {{1, 1, 1, 1, true, false},    {7, 9, 4, 2, true, false},
                             {7, 9, 4, 2, false, true},    {9, 6, 3, 3, true, false},
                             {33, 19, 8, 3, false, false}, {300, 40, 16, 4, true, true},
                             {0, 5, 3, 2, true, false}};

void expect_same_ints(const std::string& where, const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape()) << where;
  EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), got.nbytes()), 0) << where << " differs";
}

MoeRouterArgs make_args(const RouterCase& c) {
  MoeRouterArgs args{c.top_k, c.norm, {}};
  if (c.bias) args.selection_bias_E = random_f32({c.e}, 5, 0.05f);
  return args;
}

// dw_gate sums N tokens' dz x^T with cancellation: absolute error scales with max|dw_gate|.
Tolerance dw_gate_tol(const Tensor& want) {
  double scale = 1.0;
  for (double v : to_doubles(want)) scale = std::max(scale, std::fabs(v));
  return {kF32Tol.atol * scale, kF32Tol.rtol};
}

TEST(MoeRouter, KernelsMatchReference) {
  const MoeRouterImpl& ref = moe_router_table().ref();
  for (const RouterCase& c : kCases) {
    const MoeRouterArgs args = make_args(c);
    const Tensor x = random_f32({c.n, c.d}, 21, 0.7f), wg = random_f32({c.e, c.d}, 22, 0.8f);
    Tensor z_ref = Tensor::empty({c.n, c.e});
    MoeRouting r_ref;
    ref.forward(args, x, wg, z_ref, r_ref);
    const int64_t* counts = r_ref.expert_counts_E.data<int64_t>();
    EXPECT_EQ(std::accumulate(counts, counts + c.e, int64_t{0}), c.n * c.top_k) << name(c);
    const Tensor dweight = random_f32({c.n, c.top_k}, 23), dz = random_f32({c.n, c.e}, 24, 0.3f);
    for (const Tensor& dlogits : {dz, Tensor{}}) {
      Tensor dx_ref = random_f32({c.n, c.d}, 25, 100.0f), dwg_ref = random_f32({c.e, c.d}, 26);
      ref.backward(args, dweight, dlogits, x, wg, r_ref, dx_ref, dwg_ref);
      for (const MoeRouterImpl& impl : moe_router_table().impls()) {
        const std::string where = impl.name + " " + name(c) + (dlogits.defined() ? " dlogits" : "");
        Tensor z = Tensor::empty({c.n, c.e});
        MoeRouting r;
        impl.forward(args, x, wg, z, r);
        EXPECT_TRUE(all_close(where + " logits", z, z_ref, kF32Tol));
        EXPECT_TRUE(all_close(where + " probs", r.probs_NE, r_ref.probs_NE, kF32Tol));
        EXPECT_TRUE(all_close(where + " weight", r.weight_NK, r_ref.weight_NK, kF32Tol));
        expect_same_ints(where + " expert", r.expert_NK, r_ref.expert_NK);
        expect_same_ints(where + " counts", r.expert_counts_E, r_ref.expert_counts_E);
        Tensor dx = random_f32({c.n, c.d}, 25, 100.0f), dwg = random_f32({c.e, c.d}, 26);
        impl.backward(args, dweight, dlogits, x, wg, r, dx, dwg);
        EXPECT_TRUE(all_close(where + " dx", dx, dx_ref, kF32Tol));
        EXPECT_TRUE(all_close(where + " dw_gate", dwg, dwg_ref, dw_gate_tol(dwg_ref)));
      }
    }
  }
}

// Equal logits (two identical router rows, far above the rest): the lower index comes first.
TEST(MoeRouter, TiesGoToTheLowerExpert) {
  const int64_t n = 5, d = 4, e = 5;
  const Tensor x = random_f32({n, d}, 31);
  Tensor wg = Tensor::zeros({e, d});
  for (int64_t i = 0; i < d; ++i) {
    wg.data<float>()[1 * d + i] = 1.0f;
    wg.data<float>()[3 * d + i] = 1.0f;
  }
  for (int64_t t = 0; t < n; ++t) x.data<float>()[t * d] = 50.0f;  // rows 1 and 3 lead by far
  for (const MoeRouterImpl& impl : moe_router_table().impls()) {
    Tensor z = Tensor::empty({n, e});
    MoeRouting r;
    impl.forward({2, true, {}}, x, wg, z, r);
    for (int64_t t = 0; t < n; ++t) {
      EXPECT_EQ(r.expert_NK.data<int32_t>()[t * 2], 1) << impl.name << " token " << t;
      EXPECT_EQ(r.expert_NK.data<int32_t>()[t * 2 + 1], 3) << impl.name << " token " << t;
      EXPECT_NEAR(r.weight_NK.data<float>()[t * 2], 0.5, 1e-6) << impl.name;  // renormalised
    }
  }
}

TEST(MoeRouter, RejectsBadArguments) {
  const Tensor x = random_f32({4, 6}, 41), wg = random_f32({3, 6}, 42);
  Tensor z = Tensor::empty({4, 3});
  MoeRouting r;
  std::string msg = error_of([&] { moe_router_forward({4, true, {}}, x, wg, z, r); });
  EXPECT_NE(msg.find("[moe_router] top_k = 4 is outside [1, num_experts = 3]"), std::string::npos)
      << msg;
  msg = error_of([&] { moe_router_forward({2, true, Tensor::zeros({4})}, x, wg, z, r); });
  EXPECT_NE(msg.find("[moe_router] selection_bias: expected contiguous f32[3], got f32[4]"),
            std::string::npos)
      << msg;
  Tensor z_bad = Tensor::empty({4, 4});
  msg = error_of([&] { moe_router_forward({2, true, {}}, x, wg, z_bad, r); });
  EXPECT_NE(msg.find("[moe_router] logits: expected contiguous f32[4, 3], got f32[4, 4]"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

}  // namespace
}  // namespace titan::ops
