// MoE router: case list for the shared harness (op_harness.h), with and without a selection bias
// and an extra dlogits; plus ties to the lower expert index (math) and bad arguments.
#include "titan/ops/moe_router/moe_router.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t n, d, e, top_k;
  bool norm, bias;
  bool dlogits = true;  // backward also gets a gradient on the logits (the aux loss's)
};

std::string name(const Case& c) {
  return str("n=", c.n, " d=", c.d, " e=", c.e, " k=", c.top_k, c.norm ? " norm" : " raw",
             c.bias ? " bias" : "", c.dlogits ? " dlogits" : "");
}

// Odd sizes, top_k = E, one expert, a token count past the kernel's blocks, no tokens; each with
// and without dlogits.
const Case kShapes[] = {{1, 1, 1, 1, true, false},    {7, 9, 4, 2, true, false},
                        {7, 9, 4, 2, false, true},    {9, 6, 3, 3, true, false},
                        {33, 19, 8, 3, false, false}, {300, 40, 16, 4, true, true},
                        {0, 5, 3, 2, true, false}};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const Case& c : kShapes) {
    for (bool dlogits : {true, false}) all.push_back({c.n, c.d, c.e, c.top_k, c.norm, c.bias, dlogits});
  }
  return all;
}

// Selection bias of the size probs move by (they are in [0, 1]), so that it changes some choices.
Tensor selection_bias(const Case& c) { return random_f32({c.e}, 5, 0.05f); }

MoeRouterArgs make_args(const Case& c) {
  MoeRouterArgs args{c.top_k, c.norm, {}};
  if (c.bias) args.selection_bias_E = selection_bias(c);
  return args;
}

struct Inputs {
  Tensor x, w_gate, dweight, dlogits;
};
Inputs inputs(const Case& c) {
  return {random_f32({c.n, c.d}, 21, 0.7f), random_f32({c.e, c.d}, 22, 0.8f),
          random_f32({c.n, c.top_k}, 23), c.dlogits ? random_f32({c.n, c.e}, 24, 0.3f) : Tensor{}};
}

// Smallest gap, over tokens, between the k-th and (k+1)-th largest selection key (infinite when
// top_k = E): selection is constant within this distance.
double top_k_margin(const Doubles& key, int64_t n, int64_t e, int64_t top_k) {
  if (top_k == e) return INFINITY;
  double margin = INFINITY;
  for (int64_t t = 0; t < n; ++t) {
    Doubles z(key.begin() + t * e, key.begin() + (t + 1) * e);
    std::sort(z.begin(), z.end(), std::greater<>());
    margin = std::min(margin, z[top_k - 1] - z[top_k]);
  }
  return margin;
}

// The fp64 reference of x and w_gate: forward returns weight (and the logits when the case has
// dlogits), so <dy, forward> has dweight = dy's first N*K values and dlogits the rest. The
// selection is piecewise constant: the inputs must be further than the finite-difference step
// from a tie.
RefFunction moe_router_reference(const Case& c) {
  const int64_t n = c.n, d = c.d, e = c.e, k = c.top_k;
  const Tensor bias = selection_bias(c);  // the lambdas keep copies (sharing its storage)
  struct Routed {
    Doubles logits, probs, weight;
    std::vector<int32_t> expert;
  };
  auto route = [=](const std::vector<Doubles>& in) {
    const float* b = c.bias ? bias.data<float>() : nullptr;
    Routed o{Doubles(n * e), Doubles(n * e), Doubles(n * k), std::vector<int32_t>(n * k)};
    ref::moe_router_forward(n, d, e, k, c.norm, in[0].data(), in[1].data(), b, o.logits.data(),
                            o.probs.data(), o.expert.data(), o.weight.data());
    return o;
  };
  auto forward = [=](const std::vector<Doubles>& in) {
    Routed o = route(in);
    if (c.dlogits) o.weight.insert(o.weight.end(), o.logits.begin(), o.logits.end());
    return o.weight;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    const Routed o = route(in);
    Doubles dx(n * d, 7.0), dw_gate(e * d, 0.0);  // dx is written: a stale 7 must not survive
    ref::moe_router_backward(n, d, e, k, c.norm, dy.data(), c.dlogits ? dy.data() + n * k : nullptr,
                             in[0].data(), in[1].data(), o.probs.data(), o.expert.data(),
                             o.weight.data(), dx.data(), dw_gate.data());
    return std::vector<Doubles>{dx, dw_gate};
  };
  RefFunction f{{"x", "w_gate"}, {random_doubles(n * d, 11, 0.8), random_doubles(e * d, 12, 0.9)}, forward, backward};
  const Routed o = route(f.inputs);
  Doubles key = o.logits;
  for (int64_t i = 0; c.bias && i < n * e; ++i) key[i] = o.probs[i] + bias.data<float>()[i % e];
  EXPECT_GT(top_k_margin(key, n, e, k), 100 * FdOptions{}.h) << name(c) << ": near-tie, pick other inputs";
  return f;
}

// dw_gate sums N tokens' dz x^T with cancellation: absolute error scales with max|dw_gate|.
Tolerance dw_gate_tol(const Tensor& want) {
  double scale = 1.0;
  for (double v : to_doubles(want)) scale = std::max(scale, std::fabs(v));
  return {kF32Tol.atol * scale, kF32Tol.rtol};
}

OpTest<MoeRouterImpl, Case> moe_router_test() {
  return {
      .table = &moe_router_table(),
      .cases = cases(),
      .name = name,
      .supports = [](const MoeRouterImpl& impl, const Case& c) {
        const Inputs in = inputs(c);
        return impl.supports(make_args(c), in.x, in.w_gate);
      },
      .forward = [](const MoeRouterImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor logits = garbage({c.n, c.e});
        MoeRouting r;
        impl.forward(make_args(c), in.x, in.w_gate, logits, r);
        const int64_t* counts = r.expert_counts_E.data<int64_t>();
        EXPECT_EQ(std::accumulate(counts, counts + c.e, int64_t{0}), c.n * c.top_k) << impl.name << " " << name(c);
        return {{"logits", logits},
                {"probs", r.probs_NE},
                {"weight", r.weight_NK},
                {"expert", r.expert_NK},
                {"counts", r.expert_counts_E}};
      },
      // Each implementation's backward reads its own forward's routing.
      .backward = [](const MoeRouterImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        const MoeRouterArgs args = make_args(c);
        Tensor logits = Tensor::empty({c.n, c.e});
        MoeRouting r;
        impl.forward(args, in.x, in.w_gate, logits, r);
        Tensor dx = garbage({c.n, c.d}), dw_gate = random_f32({c.e, c.d}, 26);  // dw_gate accumulates
        impl.backward(args, in.dweight, in.dlogits, in.x, in.w_gate, r, dx, dw_gate);
        return {{"dx", dx}, {"dw_gate", dw_gate, dw_gate_tol(dw_gate)}};
      },
      .reference = moe_router_reference,
      // Tiny sizes; top_k = E, one expert, a bias, and one without dlogits.
      .fd_cases = {{3, 5, 4, 2, true, false},
                   {3, 5, 4, 2, false, false},
                   {4, 3, 5, 1, true, false},
                   {2, 4, 3, 3, true, false},
                   {3, 4, 6, 2, true, true},
                   {2, 3, 1, 1, false, false},
                   {3, 5, 4, 2, true, true, false}},
  };
}

TEST(MoeRouter, ReferenceBackwardMatchesFiniteDifferences) { sweep(moe_router_test(), {Mode::gradient}); }

TEST(MoeRouter, KernelsMatchReference) { sweep(moe_router_test(), {Mode::forward, Mode::backward}); }

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
