// Sparse MoE block (the composition of router, dispatch, experts and combine) on the shared
// harness (op_harness.h): the block's fused scalar reference against finite differences, and the
// composition (on the ops' kernels and on the ops' references) against that reference, as the
// entries of a test-local table. Beside the sweep: the selection bias and the one-expert identity
// with the dense SwiGLU MLP (math), determinism across thread counts, and bad arguments. Each op
// has its own tests (moe_router_test.cpp, ...).
#include "titan/ops/moe/moe.h"

#include <algorithm>
#include <cmath>
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

// ---- the block's three paths as the implementations of one contract, for the sweep ----

using ForwardFn = void (*)(const MoeArgs&, const Tensor&, const Tensor&, const Tensor&,
                           const Tensor&, const Tensor&, Tensor&, Tensor&, MoeSaved&);
using BackwardFn = void (*)(const MoeArgs&, const Tensor&, const Tensor&, const Tensor&,
                            const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                            const MoeSaved&, Tensor&, Tensor&, Tensor&, Tensor&, Tensor&);
using MoePath = OpImpl<bool (*)(), ForwardFn, BackwardFn>;

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

// The composition with every op on its preferred kernel (even under TITAN_USE_REF=1) or on its
// reference.
template <bool kUseRef>
void composed_forward(const MoeArgs& a, const Tensor& x, const Tensor& wg, const Tensor& w1,
                      const Tensor& w3, const Tensor& w2, Tensor& out, Tensor& z, MoeSaved& s) {
  const UseRef scope(kUseRef);
  moe_forward(a, x, wg, w1, w3, w2, out, z, s);
}
template <bool kUseRef>
void composed_backward(const MoeArgs& a, const Tensor& dout, const Tensor& dz, const Tensor& x,
                       const Tensor& wg, const Tensor& w1, const Tensor& w3, const Tensor& w2,
                       const MoeSaved& s, Tensor& dx, Tensor& dwg, Tensor& dw1, Tensor& dw3,
                       Tensor& dw2) {
  const UseRef scope(kUseRef);
  moe_backward(a, dout, dz, x, wg, w1, w3, w2, s, dx, dwg, dw1, dw3, dw2);
}

// Not the registry's: a table of this test's own, whose first entry (the oracle) is the block's
// fused scalar reference, independent of the four ops.
const OpTable<MoePath>& moe_paths() {
  static OpTable<MoePath> table("moe");
  if (table.impls().empty()) {
    table.add({"moe_ref", Device::cpu, nullptr, moe_forward_ref, moe_backward_ref});
    table.add({"moe (op kernels)", Device::cpu, nullptr, composed_forward<false>, composed_backward<false>});
    table.add({"moe (op references)", Device::cpu, nullptr, composed_forward<true>, composed_backward<true>});
  }
  return table;
}

struct Case {
  MoeCase shape;
  bool dlogits = true;          // backward also gets a gradient on the router logits (aux loss)
  bool ref_saved = false;       // backward reads the reference's forward: MoeSaved is a contract
  bool selection_bias = false;  // bias-based balancing (selection_bias_E)
};

std::string case_name(const Case& c) {
  return str(name(c.shape), c.selection_bias ? " selection_bias" : "", c.dlogits ? " dlogits" : "",
             c.ref_saved ? " saved by ref" : "");
}

MoeArgs make_args(const Case& c) {
  MoeArgs args{c.shape.top_k, c.shape.norm, {}};
  if (c.selection_bias) {  // +1 puts expert 4 in every token's top-k (probs are in [0, 1])
    args.selection_bias_E = Tensor::zeros({c.shape.e});
    args.selection_bias_E.data<float>()[4] = 1.0f;
    args.selection_bias_E.data<float>()[1] = 0.01f;
  }
  return args;
}

// Uneven loads, an empty expert, top_k = E, norm on/off, odd sizes, and one case past a GEMM tile
// (> 128 rows for an expert, F > 256 columns).
const MoeCase kShapes[] = {
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

// Each shape with and without dlogits, and with the reference's saved state; plus the selection
// bias (no dlogits).
std::vector<Case> cases() {
  std::vector<Case> all;
  for (const MoeCase& s : kShapes) {
    all.push_back({s, true, false});
    all.push_back({s, false, false});
    all.push_back({s, true, true});
  }
  all.push_back({{40, 8, 6, 5, 2, true, {}}, false, false, true});
  return all;
}

struct Grads {
  Tensor dx, dw_gate, dw1, dw3, dw2;
};

// dx starts as garbage (written), the weight grads as random values (accumulated).
Grads make_grads(const MoeInputs& in) {
  return {garbage(in.x.shape()), random_f32(in.w_gate.shape(), 92), random_f32(in.w1.shape(), 93),
          random_f32(in.w3.shape(), 94), random_f32(in.w2.shape(), 95)};
}

// dw_gate sums N tokens' dz x^T, with heavy cancellation in some entries: its absolute error
// scales with the tensor's magnitude (fp32 eps x max|dw_gate| x sqrt(N)), not each entry's.
Tolerance dw_gate_tol(const Tensor& want) {
  double scale = 1.0;
  for (double v : to_doubles(want)) scale = std::max(scale, std::fabs(v));
  return {kF32Tol.atol * scale, kF32Tol.rtol};
}

void run_forward(const MoePath& path, const MoeArgs& a, const MoeInputs& in, Tensor& out, Tensor& z, MoeSaved& s) {
  path.forward(a, in.x, in.w_gate, in.w1, in.w3, in.w2, out, z, s);
}

void run_backward(const MoePath& path, const MoeArgs& a, const Tensor& dout, const Tensor& dz,
                  const MoeInputs& in, const MoeSaved& saved, Grads& g) {
  path.backward(a, dout, dz, in.x, in.w_gate, in.w1, in.w3, in.w2, saved, g.dx, g.dw_gate, g.dw1, g.dw3, g.dw2);
}

// ---- 1. the fused reference's backward vs central finite differences (fp64) ----

// forward returns out (and the router logits when the case has dlogits): <dy, forward> has
// dout = dy's first N*D values and drouter_logits the rest.
RefFunction moe_reference(const Case& cs) {
  const MoeCase& c = cs.shape;
  const int64_t n = c.n, d = c.d, e = c.e, f = c.f, k = c.top_k;
  struct Out {
    Doubles out, logits, probs, weight;
    std::vector<int32_t> expert;
  };
  auto run = [=](const std::vector<Doubles>& in) {
    Out o{Doubles(n * d), Doubles(n * e), Doubles(n * e), Doubles(n * k), std::vector<int32_t>(n * k)};
    ref::moe_forward(n, d, e, f, k, c.norm, in[0].data(), in[1].data(), in[2].data(), in[3].data(),
                     in[4].data(), o.out.data(), o.logits.data(), o.probs.data(), o.expert.data(),
                     o.weight.data());
    return o;
  };
  auto forward = [=](const std::vector<Doubles>& in) {
    Out o = run(in);
    if (cs.dlogits) o.out.insert(o.out.end(), o.logits.begin(), o.logits.end());
    return o.out;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    const Out o = run(in);
    Doubles dx(n * d, 7.0), dwg(e * d, 0.0), dw1(e * f * d, 0.0), dw3(e * f * d, 0.0), dw2(e * d * f, 0.0);
    ref::moe_backward(n, d, e, f, k, c.norm, dy.data(), cs.dlogits ? dy.data() + n * d : nullptr,
                      in[0].data(), in[1].data(), in[2].data(), in[3].data(), in[4].data(),
                      o.probs.data(), o.expert.data(), o.weight.data(), dx.data(), dwg.data(),
                      dw1.data(), dw3.data(), dw2.data());
    return std::vector<Doubles>{dx, dwg, dw1, dw3, dw2};
  };
  RefFunction fn{{"x", "w_gate", "w1", "w3", "w2"},
                 {random_doubles(n * d, 21, 0.8), random_doubles(e * d, 22, 0.9),
                  random_doubles(e * f * d, 23, 0.5), random_doubles(e * f * d, 24, 0.5),
                  random_doubles(e * d * f, 25, 0.5)},
                 forward,
                 backward};
  // Perturbing one input by h moves a logit by at most h * |other factor| (< 4h here).
  const double h = FdOptions{}.h, margin = top_k_margin(run(fn.inputs).logits, n, e, k);
  EXPECT_GT(margin, 100 * h) << case_name(cs) << ": router near-tie, pick other inputs";
  std::cout << "[moe fd] " << case_name(cs) << " top-k logit margin " << margin << " (step " << h << ")\n";
  ::testing::Test::RecordProperty("fd_margin " + case_name(cs), std::to_string(margin));
  return fn;
}

// ---- 2. the composition (on the op kernels and on the op references) vs the fused reference ----

OpTest<MoePath, Case> moe_test() {
  return {
      .table = &moe_paths(),
      .cases = cases(),
      .name = case_name,
      .forward = [](const MoePath& path, const Case& cs) -> Outputs {
        const MoeCase& c = cs.shape;
        const MoeInputs in = make_inputs(c, 31);
        Tensor out = garbage({c.n, c.d}), z = garbage({c.n, c.e});
        MoeSaved s;
        run_forward(path, make_args(cs), in, out, z, s);
        const int64_t* counts = s.expert_counts_E.data<int64_t>();
        EXPECT_EQ(std::accumulate(counts, counts + c.e, int64_t{0}), c.n * c.top_k) << path.name << " " << name(c);
        if (c.empty_expert >= 0) {
          EXPECT_EQ(counts[c.empty_expert], 0) << path.name << " " << name(c);
        }
        return {{"out", out},
                {"router_logits", z},
                {"probs", s.probs_NE},
                {"weight", s.weight_NK},
                {"gate", s.gate_PF},
                {"up", s.up_PF},
                {"expert", s.expert_NK},
                {"expert_counts", s.expert_counts_E},
                {"offsets", s.offsets_E1},
                {"row_of_pair", s.row_of_pair_NK},
                {"pair_of_row", s.pair_of_row_P}};
      },
      .backward = [](const MoePath& path, const Case& cs) -> Outputs {
        const MoeCase& c = cs.shape;
        const MoeInputs in = make_inputs(c, 31);
        const MoeArgs args = make_args(cs);
        Tensor out = Tensor::empty({c.n, c.d}), z = Tensor::empty({c.n, c.e});
        MoeSaved s;
        run_forward(cs.ref_saved ? moe_paths().ref() : path, args, in, out, z, s);
        const Tensor dout = random_f32({c.n, c.d}, 41);
        const Tensor dz = cs.dlogits ? random_f32({c.n, c.e}, 42, 0.3f) : Tensor{};
        Grads g = make_grads(in);
        run_backward(path, args, dout, dz, in, s, g);
        return {{"dx", g.dx},
                {"dw_gate", g.dw_gate, dw_gate_tol(g.dw_gate)},
                {"dw1", g.dw1},
                {"dw3", g.dw3},
                {"dw2", g.dw2}};
      },
      .reference = moe_reference,
      .fd_cases = {{{3, 5, 4, 6, 2, true, {}}},
                   {{3, 5, 4, 6, 2, false, {}}},
                   {{2, 4, 3, 5, 3, true, {}}},  // top_k = E
                   {{4, 3, 5, 2, 1, false, {}}},
                   {{2, 3, 1, 4, 1, true, {}}},  // one expert
                   {{3, 5, 4, 6, 2, true, {}}, false}},
  };
}

TEST(Moe, ReferenceBackwardMatchesFiniteDifferences) { sweep(moe_test(), {Mode::gradient}); }

TEST(Moe, CompositionMatchesReference) { sweep(moe_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

// Bias-based balancing: the bias moves selection only. A bias of +1 on one expert (probs are in
// [0, 1]) puts it in every token's top-k; its weight is still its prob (renormalised). (Against
// the reference with the same bias: the sweep's selection_bias case.)
TEST(Moe, SelectionBiasMovesSelectionNotWeights) {
  const Case cs{{40, 8, 6, 5, 2, true, {}}, false, false, true};
  const MoeCase& c = cs.shape;
  const MoeInputs in = make_inputs(c, 81);
  for (const MoePath& path : moe_paths().impls()) {
    Tensor out = Tensor::empty({c.n, c.d}), z = Tensor::empty({c.n, c.e});
    MoeSaved s;
    run_forward(path, make_args(cs), in, out, z, s);
    EXPECT_EQ(s.expert_counts_E.data<int64_t>()[4], c.n) << path.name;
    for (int64_t t = 0; t < c.n; ++t) {
      const int32_t* ex = s.expert_NK.data<int32_t>() + t * c.top_k;
      const float* p = s.probs_NE.data<float>() + t * c.e;
      EXPECT_EQ(ex[0], 4) << path.name << " token " << t;
      const double psum = static_cast<double>(p[ex[0]]) + p[ex[1]];
      EXPECT_NEAR(s.weight_NK.data<float>()[t * c.top_k], p[4] / psum, 1e-6) << path.name;
    }
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

    for (const MoePath& impl : moe_paths().impls()) {
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
