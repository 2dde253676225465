// Sparse MoE block (the composition of router, dispatch, experts and combine): the block's fused
// scalar reference against finite differences, the composition (on the ops' kernels and on the
// ops' references) against that reference, the one-expert identity with the dense SwiGLU MLP,
// determinism, and bad arguments. Each op has its own tests (moe_router_test.cpp, ...).
#include "titan/ops/moe/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <numeric>

#include "ops/op_harness.h"
#include "titan/core/parallel.h"
#include "titan/ops/matmul/linear.h"
#include "titan/ops/swiglu/swiglu.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct MoeCase {
  int64_t n, d, e, f, top_k;
  bool norm;
  // Router skew: x[:, 0] is set to 1 and w_gate[j, 0] to bias[j] (only for the listed experts),
  // so bias > 0 makes an expert popular and a large negative bias leaves it empty.
  std::vector<std::pair<int64_t, float>> bias;
  int64_t empty_expert = -1;  // expert the case expects to receive no tokens
};

std::string name(const MoeCase& c) {
  return str("n=", c.n, " d=", c.d, " e=", c.e, " f=", c.f, " k=", c.top_k,
             c.norm ? " norm" : " raw");
}

struct MoeInputs {
  Tensor x, w_gate, w1, w3, w2;
};

MoeInputs make_inputs(const MoeCase& c, uint64_t seed) {
  MoeInputs in{random_f32({c.n, c.d}, seed, 0.7f), random_f32({c.e, c.d}, seed + 1, 0.8f),
               random_f32({c.e, c.f, c.d}, seed + 2, 0.4f),
               random_f32({c.e, c.f, c.d}, seed + 3, 0.4f),
               random_f32({c.e, c.d, c.f}, seed + 4, 0.4f)};
  if (!c.bias.empty()) {
    for (int64_t t = 0; t < c.n; ++t) in.x.data<float>()[t * c.d] = 1.0f;
    for (const auto& [j, b] : c.bias) in.w_gate.data<float>()[j * c.d] = b;
  }
  return in;
}

// Smallest gap, over tokens, between the k-th and (k+1)-th largest router logit (infinite when
// top_k = E): selection is constant within this distance.
double top_k_margin(const std::vector<double>& logits, int64_t n, int64_t e, int64_t top_k) {
  if (top_k == e) return INFINITY;
  double margin = INFINITY;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<double> z(logits.begin() + t * e, logits.begin() + (t + 1) * e);
    std::sort(z.begin(), z.end(), std::greater<>());
    margin = std::min(margin, z[top_k - 1] - z[top_k]);
  }
  return margin;
}

// ---- 1. reference backward vs central finite differences (fp64) ----

TEST(Moe, ReferenceBackwardMatchesFiniteDifferences) {
  const MoeCase cases[] = {{3, 5, 4, 6, 2, true, {}},
                           {3, 5, 4, 6, 2, false, {}},
                           {2, 4, 3, 5, 3, true, {}},   // top_k = E
                           {4, 3, 5, 2, 1, false, {}},
                           {2, 3, 1, 4, 1, true, {}}};  // one expert
  const double h = 1e-5;
  for (const MoeCase& c : cases) {
    const int64_t n = c.n, d = c.d, e = c.e, f = c.f, k = c.top_k;
    auto x0 = random_doubles(n * d, 21, 0.8), wg0 = random_doubles(e * d, 22, 0.9);
    auto w10 = random_doubles(e * f * d, 23, 0.5), w30 = random_doubles(e * f * d, 24, 0.5);
    auto w20 = random_doubles(e * d * f, 25, 0.5);
    const auto r = random_doubles(n * d, 26), rz = random_doubles(n * e, 27);  // loss weights
    struct Out {
      std::vector<double> out, logits, probs, weight;
      std::vector<int32_t> expert;
    };
    auto run = [&](const std::vector<double>& x, const std::vector<double>& wg,
                   const std::vector<double>& w1, const std::vector<double>& w3,
                   const std::vector<double>& w2) {
      Out o{std::vector<double>(n * d), std::vector<double>(n * e), std::vector<double>(n * e),
            std::vector<double>(n * k), std::vector<int32_t>(n * k)};
      ref::moe_forward(n, d, e, f, k, c.norm, x.data(), wg.data(), w1.data(), w3.data(),
                       w2.data(), o.out.data(), o.logits.data(), o.probs.data(), o.expert.data(),
                       o.weight.data());
      return o;
    };
    // loss = sum(out * r) + sum(logits * rz): dout = r, drouter_logits = rz.
    auto loss = [&](const auto& x, const auto& wg, const auto& w1, const auto& w3, const auto& w2) {
      const Out o = run(x, wg, w1, w3, w2);
      return dot(o.out, r) + dot(o.logits, rz);
    };
    const Out o = run(x0, wg0, w10, w30, w20);
    const double margin = top_k_margin(o.logits, n, e, k);
    // Perturbing one input by h moves a logit by at most h * |other factor| (< 4h here).
    EXPECT_GT(margin, 100 * h) << name(c) << ": router near-tie, pick other inputs";
    std::cout << "[moe fd] " << name(c) << " top-k logit margin " << margin << " (step " << h
              << ")\n";
    RecordProperty("fd_margin " + name(c), std::to_string(margin));
    std::vector<double> dx(n * d), dwg(e * d, 0.0), dw1(e * f * d, 0.0), dw3(e * f * d, 0.0),
        dw2(e * d * f, 0.0);
    ref::moe_backward(n, d, e, f, k, c.norm, r.data(), rz.data(), x0.data(), wg0.data(),
                      w10.data(), w30.data(), w20.data(), o.probs.data(), o.expert.data(),
                      o.weight.data(), dx.data(), dwg.data(), dw1.data(), dw3.data(), dw2.data());
    const std::string w = "moe_ref " + name(c);
    EXPECT_TRUE(all_close(w + " dx", dx, numeric_gradient([&](const auto& v) {
      return loss(v, wg0, w10, w30, w20); }, x0, h), kFdTol));
    EXPECT_TRUE(all_close(w + " dw_gate", dwg, numeric_gradient([&](const auto& v) {
      return loss(x0, v, w10, w30, w20); }, wg0, h), kFdTol));
    EXPECT_TRUE(all_close(w + " dw1", dw1, numeric_gradient([&](const auto& v) {
      return loss(x0, wg0, v, w30, w20); }, w10, h), kFdTol));
    EXPECT_TRUE(all_close(w + " dw3", dw3, numeric_gradient([&](const auto& v) {
      return loss(x0, wg0, w10, v, w20); }, w30, h), kFdTol));
    EXPECT_TRUE(all_close(w + " dw2", dw2, numeric_gradient([&](const auto& v) {
      return loss(x0, wg0, w10, w30, v); }, w20, h), kFdTol));
  }
}

// ---- 2. the composition vs the block's reference, forward and backward ----

using ForwardFn = void (*)(const MoeArgs&, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&, Tensor&, Tensor&, MoeSaved&);
using BackwardFn = void (*)(const MoeArgs&, const Tensor&, const Tensor&, const Tensor&,
                            const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const MoeSaved&, Tensor&, Tensor&, Tensor&, Tensor&, Tensor&);

// A way to run the block: the fused reference, or the composition with every op on its preferred
// kernel or (use_ref) on its reference.
struct Path {
  std::string name;
  ForwardFn forward;
  BackwardFn backward;
  bool use_ref;
};
const Path kRefPath{"moe_ref", moe_forward_ref, moe_backward_ref, false};
const Path kCompositions[] = {{"moe (op kernels)", moe_forward, moe_backward, false},
                              {"moe (op references)", moe_forward, moe_backward, true}};

// Sets the ops' use_ref switch for one scope.
class UseRef {
 public:
  explicit UseRef(bool on) : before_(use_ref()) { set_use_ref(on); }
  ~UseRef() { set_use_ref(before_); }
  UseRef(const UseRef&) = delete;
  UseRef& operator=(const UseRef&) = delete;

 private:
  bool before_;
};

void run_forward(const Path& path, const MoeArgs& a, const MoeInputs& in, Tensor& out, Tensor& z,
                 MoeSaved& s) {
  UseRef scope(path.use_ref);
  path.forward(a, in.x, in.w_gate, in.w1, in.w3, in.w2, out, z, s);
}

// Uneven loads, an empty expert, top_k = E, norm on/off, odd sizes, and one case past a GEMM tile
// (> 128 rows for an expert, F > 256 columns).
const MoeCase kCases[] = {
    {1, 1, 1, 1, 1, true, {}},
    {7, 9, 4, 5, 2, true, {}},
    {7, 9, 4, 5, 2, false, {}},
    {13, 17, 5, 11, 2, true, {{0, 3.0f}, {3, -30.0f}}, 3},  // expert 0 popular, 3 empty
    {13, 17, 5, 11, 2, false, {{0, 3.0f}, {3, -30.0f}}, 3},
    {9, 6, 3, 7, 3, true, {}},   // top_k = E
    {9, 6, 3, 7, 3, false, {}},
    {33, 19, 8, 23, 3, true, {{1, 2.0f}, {6, -30.0f}}, 6},
    {300, 40, 4, 300, 2, true, {{2, 1.5f}}},
};

void expect_same_ints(const std::string& where, const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape()) << where;
  ASSERT_EQ(got.dtype(), want.dtype()) << where;
  EXPECT_EQ(std::memcmp(got.raw_data(), want.raw_data(), got.nbytes()), 0) << where << " differs";
}

struct Grads {
  Tensor dx, dw_gate, dw1, dw3, dw2;
};

// dx starts as garbage (written), the weight grads as random values (accumulated).
Grads make_grads(const MoeInputs& in) {
  Grads g{random_f32(in.x.shape(), 91, 100.0f), random_f32(in.w_gate.shape(), 92),
          random_f32(in.w1.shape(), 93), random_f32(in.w3.shape(), 94),
          random_f32(in.w2.shape(), 95)};
  return g;
}

void run_backward(const Path& path, const MoeArgs& a, const Tensor& dout, const Tensor& dz,
                  const MoeInputs& in, const MoeSaved& saved, Grads& g) {
  UseRef scope(path.use_ref);
  path.backward(a, dout, dz, in.x, in.w_gate, in.w1, in.w3, in.w2, saved, g.dx, g.dw_gate, g.dw1,
                g.dw3, g.dw2);
}

void expect_grads_close(const std::string& where, const Grads& got, const Grads& want) {
  EXPECT_TRUE(all_close(where + " dx", got.dx, want.dx, kF32Tol));
  // dw_gate sums N tokens' dz x^T, with heavy cancellation in some entries: its absolute error
  // scales with the tensor's magnitude (fp32 eps x max|dw_gate| x sqrt(N)), not each entry's.
  double scale = 1.0;
  for (double v : to_doubles(want.dw_gate)) scale = std::max(scale, std::fabs(v));
  EXPECT_TRUE(all_close(where + " dw_gate", got.dw_gate, want.dw_gate, {kF32Tol.atol * scale, kF32Tol.rtol}));
  EXPECT_TRUE(all_close(where + " dw1", got.dw1, want.dw1, kF32Tol));
  EXPECT_TRUE(all_close(where + " dw3", got.dw3, want.dw3, kF32Tol));
  EXPECT_TRUE(all_close(where + " dw2", got.dw2, want.dw2, kF32Tol));
}

TEST(Moe, CompositionMatchesReference) {
  const Path& ref = kRefPath;
  for (const MoeCase& c : kCases) {
    const MoeInputs in = make_inputs(c, 31);
    const MoeArgs args{c.top_k, c.norm, {}};
    Tensor out_ref = Tensor::empty({c.n, c.d}), z_ref = Tensor::empty({c.n, c.e});
    MoeSaved s_ref;
    run_forward(ref, args, in, out_ref, z_ref, s_ref);
    if (c.empty_expert >= 0) {
      ASSERT_EQ(s_ref.expert_counts_E.data<int64_t>()[c.empty_expert], 0) << name(c);
    }
    const int64_t* counts = s_ref.expert_counts_E.data<int64_t>();
    EXPECT_EQ(std::accumulate(counts, counts + c.e, int64_t{0}), c.n * c.top_k) << name(c);
    const Tensor dout = random_f32({c.n, c.d}, 41), dz = random_f32({c.n, c.e}, 42, 0.3f);
    Grads g_ref = make_grads(in), g_ref_nodz = make_grads(in);
    run_backward(ref, args, dout, dz, in, s_ref, g_ref);
    run_backward(ref, args, dout, Tensor{}, in, s_ref, g_ref_nodz);
    for (const Path& impl : kCompositions) {
      const std::string where = impl.name + " " + name(c);
      Tensor out = Tensor::empty({c.n, c.d}), z = Tensor::empty({c.n, c.e});
      MoeSaved s;
      run_forward(impl, args, in, out, z, s);
      EXPECT_TRUE(all_close(where + " out", out, out_ref, kF32Tol));
      EXPECT_TRUE(all_close(where + " router_logits", z, z_ref, kF32Tol));
      EXPECT_TRUE(all_close(where + " probs", s.probs_NE, s_ref.probs_NE, kF32Tol));
      EXPECT_TRUE(all_close(where + " weight", s.weight_NK, s_ref.weight_NK, kF32Tol));
      EXPECT_TRUE(all_close(where + " gate", s.gate_PF, s_ref.gate_PF, kF32Tol));
      EXPECT_TRUE(all_close(where + " up", s.up_PF, s_ref.up_PF, kF32Tol));
      expect_same_ints(where + " expert", s.expert_NK, s_ref.expert_NK);
      expect_same_ints(where + " expert_counts", s.expert_counts_E, s_ref.expert_counts_E);
      expect_same_ints(where + " offsets", s.offsets_E1, s_ref.offsets_E1);
      expect_same_ints(where + " row_of_pair", s.row_of_pair_NK, s_ref.row_of_pair_NK);
      expect_same_ints(where + " pair_of_row", s.pair_of_row_P, s_ref.pair_of_row_P);
      Grads g = make_grads(in), g_nodz = make_grads(in), g_cross = make_grads(in);
      run_backward(impl, args, dout, dz, in, s, g);
      expect_grads_close(where + " (dlogits)", g, g_ref);
      run_backward(impl, args, dout, Tensor{}, in, s, g_nodz);
      expect_grads_close(where + " (no dlogits)", g_nodz, g_ref_nodz);
      // The saved struct is a contract: the composition's backward on the reference's forward.
      run_backward(impl, args, dout, dz, in, s_ref, g_cross);
      expect_grads_close(where + " (saved by ref)", g_cross, g_ref);
    }
  }
}

// Bias-based balancing: the bias moves selection only. A bias of +1 on one expert (probs are in
// [0, 1]) puts it in every token's top-k; its weight is still its prob (renormalised).
TEST(Moe, SelectionBiasMovesSelectionNotWeights) {
  const MoeCase c{40, 8, 6, 5, 2, true, {}};
  const MoeInputs in = make_inputs(c, 81);
  MoeArgs args{c.top_k, c.norm, {}};
  args.selection_bias_E = Tensor::zeros({c.e});
  args.selection_bias_E.data<float>()[4] = 1.0f;
  args.selection_bias_E.data<float>()[1] = 0.01f;
  for (const Path& impl : {kRefPath, kCompositions[0], kCompositions[1]}) {
    Tensor out = Tensor::empty({c.n, c.d}), z = Tensor::empty({c.n, c.e});
    MoeSaved s;
    run_forward(impl, args, in, out, z, s);
    EXPECT_EQ(s.expert_counts_E.data<int64_t>()[4], c.n) << impl.name;
    for (int64_t t = 0; t < c.n; ++t) {
      const int32_t* ex = s.expert_NK.data<int32_t>() + t * c.top_k;
      const float* p = s.probs_NE.data<float>() + t * c.e;
      EXPECT_EQ(ex[0], 4) << impl.name << " token " << t;
      const double psum = static_cast<double>(p[ex[0]]) + p[ex[1]];
      EXPECT_NEAR(s.weight_NK.data<float>()[t * c.top_k], p[4] / psum, 1e-6) << impl.name;
    }
    if (impl.name == "moe_ref") continue;
    // Against the reference with the same bias, forward and backward.
    Tensor out_ref = Tensor::empty({c.n, c.d}), z_ref = Tensor::empty({c.n, c.e});
    MoeSaved s_ref;
    run_forward(kRefPath, args, in, out_ref, z_ref, s_ref);
    expect_same_ints(impl.name + " expert (biased)", s.expert_NK, s_ref.expert_NK);
    EXPECT_TRUE(all_close(impl.name + " out (biased)", out, out_ref, kF32Tol));
    const Tensor dout = random_f32({c.n, c.d}, 82);
    Grads g = make_grads(in), g_ref = make_grads(in);
    run_backward(impl, args, dout, Tensor{}, in, s, g);
    run_backward(kRefPath, args, dout, Tensor{}, in, s_ref, g_ref);
    expect_grads_close(impl.name + " (biased)", g, g_ref);
  }
}

// ---- 3. one expert, top-1 == the dense SwiGLU MLP (swiglu + linear ops) ----

TEST(Moe, OneExpertTopOneEqualsDenseMlp) {
  const int64_t n = 11, d = 13, f = 21;
  for (bool norm : {true, false}) {
    const MoeCase c{n, d, 1, f, 1, norm, {}};
    const MoeInputs in = make_inputs(c, 51);
    const Tensor w1 = in.w1.select(0), w3 = in.w3.select(0), w2 = in.w2.select(0);
    Tensor gate = Tensor::empty({n, f}), up = Tensor::empty({n, f}), h = Tensor::empty({n, f});
    Tensor y = Tensor::empty({n, d});
    linear_forward(in.x, w1, Tensor{}, gate);
    linear_forward(in.x, w3, Tensor{}, up);
    swiglu_forward(gate, up, h);
    linear_forward(h, w2, Tensor{}, y);
    const Tensor dy = random_f32({n, d}, 52);
    Tensor dh = Tensor::empty({n, f}), dgate = Tensor::empty({n, f}), dup = Tensor::empty({n, f});
    Tensor dw1 = Tensor::zeros({f, d}), dw3 = Tensor::zeros({f, d}), dw2 = Tensor::zeros({d, f});
    Tensor dx1 = Tensor::empty({n, d}), dx3 = Tensor::empty({n, d}), none;
    linear_backward(dy, h, w2, dh, dw2, none);
    swiglu_backward(dh, gate, up, dgate, dup);
    linear_backward(dgate, in.x, w1, dx1, dw1, none);
    linear_backward(dup, in.x, w3, dx3, dw3, none);
    std::vector<double> dx_dense = to_doubles(dx1), dx3d = to_doubles(dx3);
    for (size_t i = 0; i < dx_dense.size(); ++i) dx_dense[i] += dx3d[i];

    for (const Path& impl : {kRefPath, kCompositions[0], kCompositions[1]}) {
      const std::string where = impl.name + (norm ? " norm" : " raw") + " one expert";
      const MoeArgs args{1, norm, {}};
      Tensor out = Tensor::empty({n, d}), z = Tensor::empty({n, 1});
      MoeSaved s;
      run_forward(impl, args, in, out, z, s);
      EXPECT_TRUE(all_close(where + " out", out, y, kF32Tol));
      Grads g{Tensor::empty({n, d}), Tensor::zeros({1, d}), Tensor::zeros({1, f, d}),
              Tensor::zeros({1, f, d}), Tensor::zeros({1, d, f})};
      run_backward(impl, args, dy, Tensor{}, in, s, g);
      EXPECT_TRUE(all_close(where + " dx", to_doubles(g.dx), dx_dense, kF32Tol));
      EXPECT_TRUE(all_close(where + " dw1", to_doubles(g.dw1), to_doubles(dw1), kF32Tol));
      EXPECT_TRUE(all_close(where + " dw3", to_doubles(g.dw3), to_doubles(dw3), kF32Tol));
      EXPECT_TRUE(all_close(where + " dw2", to_doubles(g.dw2), to_doubles(dw2), kF32Tol));
      // One expert: the softmax is the constant 1, so the router gets no gradient.
      EXPECT_TRUE(all_close(where + " dw_gate", to_doubles(g.dw_gate),
                            std::vector<double>(static_cast<size_t>(d), 0.0), kF32Tol));
    }
  }
}

// ---- determinism: bitwise the same result on 1 thread and on all threads ----

TEST(Moe, CompositionIsBitwiseReproducibleAcrossThreadCounts) {
  const MoeCase c{300, 40, 4, 300, 2, true, {{2, 1.5f}}};
  const MoeInputs in = make_inputs(c, 61);
  const MoeArgs args{c.top_k, c.norm, {}};
  const Tensor dout = random_f32({c.n, c.d}, 62);
  const int threads = num_threads();
  std::vector<std::vector<double>> results;
  for (int t : {1, threads}) {
    set_num_threads(t);
    Tensor out = Tensor::empty({c.n, c.d}), z = Tensor::empty({c.n, c.e});
    MoeSaved s;
    moe_forward(args, in.x, in.w_gate, in.w1, in.w3, in.w2, out, z, s);
    Grads g = make_grads(in);
    moe_backward(args, dout, Tensor{}, in.x, in.w_gate, in.w1, in.w3, in.w2, s, g.dx, g.dw_gate,
                 g.dw1, g.dw3, g.dw2);
    std::vector<double> all = to_doubles(out);
    for (const Tensor* t2 : {&g.dx, &g.dw_gate, &g.dw1, &g.dw3, &g.dw2}) {
      const auto v = to_doubles(*t2);
      all.insert(all.end(), v.begin(), v.end());
    }
    results.push_back(std::move(all));
  }
  set_num_threads(threads);
  EXPECT_TRUE(results[0] == results[1]) << "moe differs between 1 and " << threads << " threads";
}

// ---- bad arguments: one-line errors ----

TEST(Moe, RejectsBadArguments) {
  const MoeCase c{4, 6, 3, 5, 2, true, {}};
  const MoeInputs in = make_inputs(c, 71);
  Tensor out = Tensor::empty({4, 6}), z = Tensor::empty({4, 3});
  MoeSaved s;
  auto fwd = [&](const MoeArgs& a, const Tensor& wg, const Tensor& w1, const Tensor& w3,
                 const Tensor& w2, Tensor& zz) {
    return error_of([&] { moe_forward(a, in.x, wg, w1, w3, w2, out, zz, s); });
  };
  std::string msg = fwd({4, true, {}}, in.w_gate, in.w1, in.w3, in.w2, z);
  EXPECT_NE(msg.find("[moe] top_k = 4 is outside [1, num_experts = 3]"), std::string::npos) << msg;
  msg = fwd({0, true, {}}, in.w_gate, in.w1, in.w3, in.w2, z);
  EXPECT_NE(msg.find("[moe] top_k = 0"), std::string::npos) << msg;
  Tensor z0 = Tensor::empty({4, 0});
  msg = fwd({1, true, {}}, Tensor::empty({0, 6}), Tensor::empty({0, 5, 6}), Tensor::empty({0, 5, 6}),
            Tensor::empty({0, 6, 5}), z0);
  EXPECT_NE(msg.find("[moe] w_gate: expected [num_experts >= 1, 6], got f32[0, 6]"),
            std::string::npos)
      << msg;
  msg = fwd({2, true, {}}, in.w_gate, in.w1, in.w3, Tensor::empty({3, 5, 6}), z);
  EXPECT_NE(msg.find("[moe] w2: expected contiguous f32[3, 6, 5], got f32[3, 5, 6]"),
            std::string::npos)
      << msg;
  msg = fwd({2, true, {}}, in.w_gate, in.w1, Tensor::empty({3, 4, 6}), in.w2, z);
  EXPECT_NE(msg.find("[moe] w3: expected contiguous f32[3, 5, 6], got f32[3, 4, 6]"),
            std::string::npos)
      << msg;
  msg = fwd({2, true, {}}, Tensor::empty({3, 7}), in.w1, in.w3, in.w2, z);
  EXPECT_NE(msg.find("[moe] w_gate: expected contiguous f32[3, 6], got f32[3, 7]"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;  // one line
}

}  // namespace
}  // namespace titan::ops
