// Causal GQA attention: case list for the shared harness, plus two outcomes known from the math.
#include "titan/ops/attention/attention.h"

#include <cmath>
#include <limits>
#include <tuple>

#include "titan/core/dtype.h"

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

// t query rows; tk key rows (0: t) of value width kv (0: k); the mask and offsets (attention.h);
// `dlse`: the backward also takes a gradient of lse (as when the output is merged).
struct Case {
  int64_t b, t, h, g, k;
  int64_t tk = 0, kv = 0;
  AttentionMask mask = AttentionMask::causal;
  int64_t q_offset = 0, kv_offset = 0;
  bool dlse = false;
};
int64_t keys(const Case& c) { return c.tk > 0 ? c.tk : c.t; }
int64_t value_dim(const Case& c) { return c.kv > 0 ? c.kv : c.k; }
AttentionArgs args_of(const Case& c, AttentionArgs args = {}) {
  args.mask = c.mask;
  args.q_offset = c.q_offset;
  args.kv_offset = c.kv_offset;
  return args;
}
// Odd T (1, 3, 17, 33, 130), T off the 128-row tile (130, 200, 257, 300), GQA ratios 1, 2, 4,
// head dims 16..128 (24: off the 16 lanes), batch 1..3. B*G = 1 cases take the CPU backward's
// split scheme on 2 threads.
const Case kCases[] = {{1, 1, 1, 1, 16},   {1, 3, 2, 1, 32},    {2, 17, 4, 2, 16},
                       {1, 33, 4, 1, 64},  {3, 130, 2, 2, 32},  {1, 130, 8, 2, 128},
                       {2, 200, 4, 4, 64}, {1, 257, 8, 2, 128}, {1, 300, 4, 1, 64},
                       {3, 5, 4, 4, 16},   {2, 19, 4, 2, 24},
                       // Offsets, other key counts and value widths, a full mask, the lse gradient:
                       // queries after their keys (a later sequence part), rows that see no key
                       // (a whole first query tile of them: queries 0..129 before keys at 130..),
                       // key ranges off the tiles on both sides.
                       {1, 5, 2, 1, 4, 7, 3, AttentionMask::causal, 4, 0, true},
                       {2, 3, 4, 2, 8, 6, 8, AttentionMask::full, 0, 0, true},
                       {1, 6, 2, 1, 8, 5, 8, AttentionMask::causal, 0, 3, true},
                       {1, 200, 4, 2, 64, 300, 32, AttentionMask::causal, 300, 200, true},
                       {1, 300, 4, 1, 64, 140, 64, AttentionMask::causal, 0, 130, true},
                       {2, 130, 2, 2, 32, 257, 16, AttentionMask::full, 0, 0, true},
                       {3, 140, 4, 2, 16, 129, 40, AttentionMask::causal, 129, 0, false}};

std::string name(const Case& c) {
  std::string n = str("B=", c.b, " T=", c.t, " H=", c.h, " G=", c.g, " K=", c.k);
  if (c.tk > 0 || c.kv > 0) n += str(" Tk=", keys(c), " Kv=", value_dim(c));
  if (c.mask == AttentionMask::full) n += " full";
  if (c.q_offset != 0 || c.kv_offset != 0) n += str(" q_offset=", c.q_offset, " kv_offset=", c.kv_offset);
  if (c.dlse) n += " dlse";
  return n;
}

struct Inputs {
  Tensor q, k, v, dout, dlse;  // dlse undefined unless c.dlse
};
Inputs inputs(const Case& c) {
  return {random_f32({c.b, c.t, c.h, c.k}, 11), random_f32({c.b, keys(c), c.g, c.k}, 12),
          random_f32({c.b, keys(c), c.g, value_dim(c)}, 13), random_f32({c.b, c.t, c.h, value_dim(c)}, 14),
          c.dlse ? random_f32({c.b, c.h, c.t}, 15) : Tensor()};
}
Shape out_shape(const Case& c) { return {c.b, c.t, c.h, value_dim(c)}; }

ref::AttentionSizes sizes(const Case& c) { return {c.b, c.t, keys(c), c.h, c.g, c.k, value_dim(c)}; }

// The differentiable inputs: q, k, v; the output out, followed by lse when the case has a lse
// gradient (so the check covers it too); otherwise lse is only what backward needs.
RefFunction attention_reference(const Case& c) {
  const double scale = 0.7;
  const AttentionArgs args = args_of(c);
  const ref::AttentionSizes n = sizes(c);
  const int64_t nq = n.b * n.tq * n.h * n.k, nk = n.b * n.tk * n.g * n.k, nv = n.b * n.tk * n.g * n.kv;
  const int64_t no = n.b * n.tq * n.h * n.kv, nl = n.b * n.h * n.tq;
  auto forward = [=](const std::vector<Doubles>& in, Doubles& lse) {
    Doubles out(no);
    lse.resize(nl);
    ref::attention_forward(n, scale, args, in[0].data(), in[1].data(), in[2].data(), out.data(), lse.data());
    return out;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    Doubles lse, dq(nq), dk(nk), dv(nv);
    const Doubles out = forward(in, lse);
    ref::attention_backward(n, scale, args, dy.data(), c.dlse ? dy.data() + no : nullptr, in[0].data(),
                            in[1].data(), in[2].data(), out.data(), lse.data(), dq.data(), dk.data(), dv.data());
    return std::vector<Doubles>{dq, dk, dv};
  };
  return {{"q", "k", "v"},
          {random_doubles(nq, 1), random_doubles(nk, 2), random_doubles(nv, 3)},
          [forward, c](const std::vector<Doubles>& in) {
            Doubles lse;
            Doubles out = forward(in, lse);
            if (c.dlse) out.insert(out.end(), lse.begin(), lse.end());
            return out;
          },
          backward};
}

OpTest<AttentionImpl, Case> attention_test() {
  return {
      .table = &attention_table(),
      .cases = {std::begin(kCases), std::end(kCases)},
      .name = name,
      .supports = [](const AttentionImpl& impl, const Case& c) {
        const Inputs in = inputs(c);
        return impl.supports(in.q, in.k, in.v);
      },
      .forward = [](const AttentionImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor out = garbage(out_shape(c));
        AttentionSaved saved{garbage({c.b, c.h, c.t})};
        impl.forward(args_of(c), in.q, in.k, in.v, out, saved);
        return {{"out", out}, {"lse", saved.lse_BHT}};
      },
      // Every implementation's backward reads the reference's forward, so that only the backward
      // is compared here.
      .backward = [](const AttentionImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor out = Tensor::empty(out_shape(c));
        AttentionSaved saved{Tensor::empty({c.b, c.h, c.t})};
        attention_table().ref().forward(args_of(c), in.q, in.k, in.v, out, saved);
        Tensor dq = garbage(in.q.shape()), dk = garbage(in.k.shape()), dv = garbage(in.v.shape());
        impl.backward(args_of(c), in.dout, in.dlse, in.q, in.k, in.v, out, saved, dq, dk, dv);
        return {{"dq", dq}, {"dk", dk}, {"dv", dv}};
      },
      // With 3, B*G = 2 also takes the split backward scheme.
      .threads = {1, 2, 3},
      .reference = attention_reference,
      // Tiny sizes: finite differences cost O(size^2) forward passes.
      .fd_cases = {{1, 1, 2, 1, 2}, {1, 2, 2, 1, 3}, {1, 3, 2, 1, 4}, {2, 5, 2, 1, 4}, {1, 4, 2, 2, 1},
                   {1, 2, 2, 1, 3, 3, 2, AttentionMask::causal, 1, 0, true},
                   {1, 3, 2, 1, 2, 2, 3, AttentionMask::full, 0, 0, true},
                   {1, 3, 2, 2, 2, 4, 1, AttentionMask::causal, 2, 1, true}},
  };
}

TEST(Attention, ReferenceBackwardMatchesFiniteDifferences) { sweep(attention_test(), {Mode::gradient}); }

TEST(Attention, KernelsMatchReference) { sweep(attention_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

// One token: the only visible key is itself, so out = v of the head's kv head and
// lse = scale * q . k.
TEST(Attention, SingleTokenOutputIsV) {
  const int64_t b = 2, h = 4, g = 2, k = 8;
  const Tensor q = random_f32({b, 1, h, k}, 1), key = random_f32({b, 1, g, k}, 2),
               v = random_f32({b, 1, g, k}, 3);
  const float scale = 0.3f;
  Tensor want_out = Tensor::empty(q.shape()), want_lse = Tensor::empty({b, h, 1});
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t hi = 0; hi < h; ++hi) {
      const int64_t gi = hi / (h / g);
      double s = 0.0;
      for (int64_t c = 0; c < k; ++c) {
        want_out.data<float>()[(bi * h + hi) * k + c] = v.data<float>()[(bi * g + gi) * k + c];
        s += static_cast<double>(q.data<float>()[(bi * h + hi) * k + c]) *
             key.data<float>()[(bi * g + gi) * k + c];
      }
      want_lse.data<float>()[bi * h + hi] = static_cast<float>(s * scale);
    }
  }
  for (const AttentionImpl& impl : attention_table().impls()) {
    Tensor out = Tensor::empty(q.shape());
    AttentionSaved saved{Tensor::empty({b, h, 1})};
    impl.forward({scale}, q, key, v, out, saved);
    EXPECT_TRUE(all_close(impl.name + " out", out, want_out, kF32Tol));
    EXPECT_TRUE(all_close(impl.name + " lse", saved.lse_BHT, want_lse, kF32Tol));
  }
}

// Identical keys give equal scores, so row t averages v_0..v_t (whatever q is).
TEST(Attention, IdenticalKeysAverageValues) {
  const int64_t b = 1, t = 150, h = 2, g = 1, k = 16;
  const Tensor q = random_f32({b, t, h, k}, 1), v = random_f32({b, t, g, k}, 3);
  const Tensor one_key = random_f32({k}, 2);
  Tensor key = Tensor::empty({b, t, g, k});
  for (int64_t ti = 0; ti < t; ++ti) {
    for (int64_t c = 0; c < k; ++c) key.data<float>()[ti * k + c] = one_key.data<float>()[c];
  }
  Tensor want = Tensor::empty(q.shape());
  for (int64_t c = 0; c < k; ++c) {
    double sum = 0.0;
    for (int64_t ti = 0; ti < t; ++ti) {
      sum += v.data<float>()[ti * k + c];
      for (int64_t hi = 0; hi < h; ++hi) {
        want.data<float>()[(ti * h + hi) * k + c] = static_cast<float>(sum / (ti + 1));
      }
    }
  }
  for (const AttentionImpl& impl : attention_table().impls()) {
    Tensor out = Tensor::empty(q.shape());
    AttentionSaved saved{Tensor::empty({b, h, t})};
    impl.forward({}, q, key, v, out, saved);
    EXPECT_TRUE(all_close(impl.name + " out", out, want, kF32Tol));
  }
}

// ---- bf16 compute ------------------------------------------------------------------------------
// attention.h's rounding rule, in the kernel's two bf16 branches: native (bf16 dot products, where
// the CPU has them; elsewhere it is the emulated branch again) and emulated (f32 FMAs).

// Kernel vs reference in bf16. Both round at the same places, so they differ by summation order;
// but an f32-noise difference in S or dS moves a value across a bf16 rounding boundary now and
// then (at T = 257, H = 8 some tens of the ~265k P values), and that changes the operand by one
// bf16 ulp, 2^-8 of it: up to ~4e-3 |operand| for P near 1. So element by element the bound is one
// such flip (measured max errors: 4e-7 out, 6e-4 dv), and the mean error, where flips are rare,
// is held to f32 noise (measured <= 4e-7; the bf16 - f32 distance is >= 2.4e-4 on average).
constexpr Tolerance kBf16FlipTol{4e-3, 1e-2};
constexpr double kBf16MeanTol = 2e-6;

AttentionArgs bf16_args(bool emulate) {
  AttentionArgs args;
  args.compute = DType::bf16;
  args.emulate_bf16 = emulate;
  return args;
}

OpTest<AttentionImpl, Case> attention_bf16_test(bool emulate) {
  OpTest<AttentionImpl, Case> t = attention_test();
  const AttentionArgs args = bf16_args(emulate);
  t.forward = [args](const AttentionImpl& impl, const Case& c) -> Outputs {
    const Inputs in = inputs(c);
    Tensor out = garbage(out_shape(c));
    AttentionSaved saved{garbage({c.b, c.h, c.t})};
    impl.forward(args_of(c, args), in.q, in.k, in.v, out, saved);
    return {{"out", out, kBf16FlipTol}, {"lse", saved.lse_BHT, kF32Tol}};
  };
  t.backward = [args](const AttentionImpl& impl, const Case& c) -> Outputs {
    const Inputs in = inputs(c);
    Tensor out = Tensor::empty(out_shape(c));
    AttentionSaved saved{Tensor::empty({c.b, c.h, c.t})};
    attention_table().ref().forward(args_of(c, args), in.q, in.k, in.v, out, saved);
    Tensor dq = garbage(in.q.shape()), dk = garbage(in.k.shape()), dv = garbage(in.v.shape());
    impl.backward(args_of(c, args), in.dout, in.dlse, in.q, in.k, in.v, out, saved, dq, dk, dv);
    return {{"dq", dq, kBf16FlipTol}, {"dk", dk, kBf16FlipTol}, {"dv", dv, kBf16FlipTol}};
  };
  return t;
}

TEST(AttentionBf16, KernelMatchesReference) { sweep(attention_bf16_test(false), {Mode::forward, Mode::backward, Mode::isa_levels}); }

TEST(AttentionBf16, EmulatedKernelMatchesReference) {
  sweep(attention_bf16_test(true), {Mode::forward, Mode::backward, Mode::isa_levels});
}

struct AllOutputs {
  Tensor out, lse, dq, dk, dv;
};
// Forward then backward of one implementation, end to end.
AllOutputs run(const AttentionImpl& impl, const AttentionArgs& args, const Inputs& in) {
  AllOutputs r{Tensor::empty(in.dout.shape()), Tensor::empty({in.q.size(0), in.q.size(2), in.q.size(1)}),
               Tensor::empty(in.q.shape()), Tensor::empty(in.k.shape()), Tensor::empty(in.v.shape())};
  AttentionSaved saved{r.lse};
  impl.forward(args, in.q, in.k, in.v, r.out, saved);
  impl.backward(args, in.dout, in.dlse, in.q, in.k, in.v, r.out, saved, r.dq, r.dk, r.dv);
  return r;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
  }
  return m;
}

double mean_abs_diff(const Tensor& a, const Tensor& b) {
  double m = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) m += std::abs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]);
  return m / static_cast<double>(a.numel());
}

// Inputs rounded to bf16 first, so that only the rounding of P and dS separates bf16 from f32.
Inputs rounded(Inputs in) {
  for (Tensor* t : {&in.q, &in.k, &in.v, &in.dout}) {
    for (int64_t i = 0; i < t->numel(); ++i) t->data<float>()[i] = bf16_to_f32(f32_to_bf16(t->data<float>()[i]));
  }
  return in;
}

// A kernel that skipped a rounding would sit closer to the f32 result than to the bf16 reference.
// Random inputs exercise the rounding of q, k, v and dO; bf16-exact inputs that of P and dS alone.
TEST(AttentionBf16, RoundsLikeTheReference) {
  const Case c{1, 200, 4, 2, 64};
  const AttentionImpl& kernel = attention_table().impls().back();
  ASSERT_NE(kernel.name, attention_table().ref().name);
  for (const bool exact_inputs : {false, true}) {
    const Inputs in = exact_inputs ? rounded(inputs(c)) : inputs(c);
    const AllOutputs want = run(attention_table().ref(), bf16_args(false), in);
    const AllOutputs f32 = run(attention_table().ref(), {}, in);
    for (const bool emulate : {false, true}) {
      const AllOutputs got = run(kernel, bf16_args(emulate), in);
      const std::vector<std::tuple<const char*, const Tensor*, const Tensor*, const Tensor*>> outputs = {
          {"out", &got.out, &want.out, &f32.out},
          {"dq", &got.dq, &want.dq, &f32.dq},
          {"dk", &got.dk, &want.dk, &f32.dk},
          {"dv", &got.dv, &want.dv, &f32.dv}};
      for (const auto& [name, g, w, f] : outputs) {
        const double err = max_abs_diff(*g, *w), rounding = max_abs_diff(*w, *f);
        const double mean_err = mean_abs_diff(*g, *w), mean_rounding = mean_abs_diff(*w, *f);
        EXPECT_LT(100.0 * mean_err, mean_rounding) << name << (emulate ? " emulated" : " native")
                                                  << (exact_inputs ? ", bf16-exact inputs" : ", random inputs")
                                                  << ": mean |kernel - bf16 reference| " << mean_err
                                                  << ", mean |bf16 - f32 reference| " << mean_rounding;
        EXPECT_LT(10.0 * err, rounding) << name << (emulate ? " emulated" : " native")
                                        << (exact_inputs ? ", bf16-exact inputs" : ", random inputs")
                                        << ": kernel vs bf16 reference " << err << ", bf16 vs f32 reference "
                                        << rounding;
      }
    }
  }
}

// Within one flip per element, and f32 noise on average.
void expect_bf16_close(const std::string& where, const Tensor& got, const Tensor& want) {
  EXPECT_TRUE(all_close(where, got, want, kBf16FlipTol));
  EXPECT_LT(mean_abs_diff(got, want), kBf16MeanTol) << where;
}

// Every case, both branches, end to end (each implementation's own forward feeds its backward).
TEST(AttentionBf16, KernelMatchesReferenceOnAverage) {
  const AttentionImpl& kernel = attention_table().impls().back();
  for (const Case& c : kCases) {
    const Inputs in = inputs(c);
    const AllOutputs want = run(attention_table().ref(), args_of(c, bf16_args(false)), in);
    for (const bool emulate : {false, true}) {
      const AllOutputs got = run(kernel, args_of(c, bf16_args(emulate)), in);
      const std::string where = name(c) + (emulate ? " emulated " : " native ");
      expect_bf16_close(where + "out", got.out, want.out);
      EXPECT_TRUE(all_close(where + "lse", got.lse, want.lse, kF32Tol));
      expect_bf16_close(where + "dq", got.dq, want.dq);
      expect_bf16_close(where + "dk", got.dk, want.dk);
      expect_bf16_close(where + "dv", got.dv, want.dv);
    }
  }
}

// The two bf16 branches compute the same numbers up to summation order.
TEST(AttentionBf16, NativeAndEmulatedAgree) {
  const Inputs in = inputs({2, 257, 8, 2, 128});
  const AttentionImpl& kernel = attention_table().impls().back();
  const AllOutputs native = run(kernel, bf16_args(false), in), emulated = run(kernel, bf16_args(true), in);
  expect_bf16_close("out", native.out, emulated.out);
  EXPECT_TRUE(all_close("lse", native.lse, emulated.lse, kF32Tol));
  expect_bf16_close("dq", native.dq, emulated.dq);
  expect_bf16_close("dk", native.dk, emulated.dk);
  expect_bf16_close("dv", native.dv, emulated.dv);
}

TEST(AttentionBf16, RejectsOtherComputeTypes) {
  const Tensor q = random_f32({1, 4, 2, 8}, 1), k = random_f32({1, 4, 1, 8}, 2), v = random_f32({1, 4, 1, 8}, 3);
  Tensor out = Tensor::empty(q.shape());
  AttentionSaved saved;
  AttentionArgs args;
  args.compute = DType::f16;
  EXPECT_NE(error_of([&] { attention_forward(args, q, k, v, out, saved); }).find("[attention] args.compute: expected f32 or bf16, got f16"),
            std::string::npos);
}

TEST(Attention, DispatchAllocatesLse) {
  const Tensor q = random_f32({2, 9, 4, 16}, 1), k = random_f32({2, 9, 2, 16}, 2),
               v = random_f32({2, 9, 2, 16}, 3);
  Tensor out = Tensor::empty(q.shape());
  AttentionSaved saved;
  attention_forward({}, q, k, v, out, saved);
  ASSERT_TRUE(saved.lse_BHT.defined());
  EXPECT_EQ(saved.lse_BHT.shape(), (Shape{2, 4, 9}));
  Tensor dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()), dv = Tensor::empty(k.shape());
  attention_backward({}, random_f32(q.shape(), 4), Tensor(), q, k, v, out, saved, dq, dk, dv);
}

TEST(Attention, RejectsHeadsNotDivisibleByKvHeads) {
  const Tensor q = random_f32({1, 4, 6, 8}, 1), k = random_f32({1, 4, 4, 8}, 2),
               v = random_f32({1, 4, 4, 8}, 3);
  Tensor out = Tensor::empty(q.shape());
  AttentionSaved saved;
  try {
    attention_forward({}, q, k, v, out, saved);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[attention] k: 4 kv heads do not divide q's 6 query heads"),
              std::string::npos)
        << e.what();
  }
}

TEST(Attention, RejectsMismatchedHeadDims) {
  const Tensor q = random_f32({1, 4, 2, 8}, 1), k = random_f32({1, 5, 1, 6}, 2), v = random_f32({1, 5, 1, 8}, 3);
  Tensor out = Tensor::empty(q.shape());
  AttentionSaved saved;
  EXPECT_NE(error_of([&] { attention_forward({}, q, k, v, out, saved); }).find("[attention] k: expected f32[1, Tk, G, 8]"),
            std::string::npos);
  const Tensor k5 = random_f32({1, 5, 1, 8}, 2), v4 = random_f32({1, 4, 1, 8}, 3);
  EXPECT_NE(error_of([&] { attention_forward({}, q, k5, v4, out, saved); })
                .find("[attention] v: expected a contiguous f32[1, 5, 1, Kv] like k"),
            std::string::npos);
  const Tensor v16 = random_f32({1, 5, 1, 16}, 3);
  EXPECT_NE(error_of([&] { attention_forward({}, q, k5, v16, out, saved); })
                .find("[attention] out: expected a contiguous f32[1, 4, 2, 16] (q's rows and heads, v's head dim)"),
            std::string::npos);
}

// A query that stands before every key (causal) sees nothing: out 0, lse -inf, and no gradient
// reaches q, k or v through it; the row after it sees exactly key 0.
TEST(Attention, QueriesBeforeTheirKeysSeeNothing) {
  const int64_t b = 1, t = 2, h = 2, g = 1, k = 8;
  const Tensor q = random_f32({b, t, h, k}, 1), key = random_f32({b, 1, g, k}, 2), v = random_f32({b, 1, g, k}, 3);
  AttentionArgs args;
  args.q_offset = 4, args.kv_offset = 5;  // query rows at 4 and 5, the key at 5
  for (const AttentionImpl& impl : attention_table().impls()) {
    Tensor out = garbage(q.shape());
    AttentionSaved saved{garbage({b, h, t})};
    impl.forward(args, q, key, v, out, saved);
    for (int64_t hi = 0; hi < h; ++hi) {
      EXPECT_EQ(saved.lse_BHT.data<float>()[hi * t], -std::numeric_limits<float>::infinity()) << impl.name;
      for (int64_t c = 0; c < k; ++c) {
        EXPECT_EQ(out.data<float>()[hi * k + c], 0.0f) << impl.name;                          // row 0
        EXPECT_EQ(out.data<float>()[(h + hi) * k + c], v.data<float>()[c]) << impl.name;  // row 1 = v_0
      }
    }
    Tensor dout = random_f32(q.shape(), 4);
    for (int64_t i = 0; i < h * k; ++i) dout.data<float>()[h * k + i] = 0.0f;  // only row 0's gradient
    Tensor dq = garbage(q.shape()), dk = garbage(key.shape()), dv = garbage(v.shape());
    impl.backward(args, dout, Tensor(), q, key, v, out, saved, dq, dk, dv);
    for (const Tensor* grad : {&dq, &dk, &dv}) {
      for (int64_t i = 0; i < grad->numel(); ++i) EXPECT_EQ(grad->data<float>()[i], 0.0f) << impl.name;
    }
  }
}

}  // namespace
}  // namespace titan::ops
