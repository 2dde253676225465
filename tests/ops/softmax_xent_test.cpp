// Fused lm_head + cross-entropy: case list for the shared harness, plus math and memory checks.
#include "titan/ops/softmax_xent/softmax_xent.h"

#include <cmath>

#include "ops/op_harness.h"
#include "titan/core/rng.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/ops/elementwise/elementwise.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

constexpr int64_t kIgnore = -100;

// Targets uniform in [0, v); every `ignore_every`-th one (if > 0) is ignore_index.
Tensor make_targets(int64_t n, int64_t v, uint64_t seed, int64_t ignore_every) {
  Tensor t = Tensor::empty({n}, DType::i64);
  int64_t* p = t.data<int64_t>();
  Rng(seed).fill_int(p, n, v);
  if (ignore_every > 0) {
    for (int64_t i = 0; i < n; i += ignore_every) p[i] = kIgnore;
  }
  return t;
}

struct Case {
  int64_t n, d, v, chunk_tokens, ignore_every;
};
// Single token, V below / at / above the 16-lane width and not a multiple of it, chunks smaller
// than N (so several chunks, including a short last one, run), ignored targets.
const Case kCases[] = {{1, 8, 17, 0, 0},    {1, 16, 5, 0, 0},    {3, 7, 16, 0, 2},
                       {5, 16, 33, 2, 3},   {7, 33, 100, 3, 0},  {16, 64, 257, 5, 4},
                       {9, 24, 1000, 4, 5}, {32, 48, 4099, 0, 7}};

std::string name(const Case& c) {
  return str("n=", c.n, " d=", c.d, " v=", c.v, " chunk=", c.chunk_tokens, " ignore_every=",
             c.ignore_every);
}

// loss_sum is a double sum of up to N per-token losses computed from f32 logits.
constexpr Tolerance kLossTol{1e-4, 1e-5};

struct Inputs {
  Tensor x, w, targets;
  LmHeadXentArgs args;
  float grad_scale;
};
Inputs inputs(const Case& c) {
  return {random_f32({c.n, c.d}, 11), random_f32({c.v, c.d}, 12, 0.3f), make_targets(c.n, c.v, 13, c.ignore_every),
          {kIgnore, c.chunk_tokens}, 1.0f / static_cast<float>(std::max<int64_t>(1, c.n))};
}

Outputs loss_outputs(const LmHeadXentResult& r) {
  return {{"loss_sum", r.loss_sum, kLossTol},
          {"num_targets", static_cast<double>(r.num_targets), kExact}};
}

Outputs xent_forward(const LmHeadXentImpl& impl, const Case& c) {
  const Inputs in = inputs(c);
  const LmHeadXentResult r = impl.forward(in.args, in.x, in.w, in.targets);
  EXPECT_EQ(r.num_targets, count_targets(in.targets)) << impl.name << " " << name(c);
  return loss_outputs(r);
}

// The fused pass: loss and gradients, also with only one of the two gradients asked for.
Outputs xent_backward(const LmHeadXentImpl& impl, const Case& c) {
  const Inputs in = inputs(c);
  // dweight accumulates: every run starts it from the same non-zero values; dx is written.
  Tensor dx = garbage(in.x.shape()), dw = random_f32(in.w.shape(), 14);
  const LmHeadXentResult r = impl.backward(in.args, in.x, in.w, in.targets, in.grad_scale, dx, dw);
  const double loss_fwd = impl.forward(in.args, in.x, in.w, in.targets).loss_sum;
  EXPECT_NEAR(r.loss_sum, loss_fwd, 1e-4 + 1e-5 * std::fabs(loss_fwd)) << impl.name << " " << name(c);
  Tensor dx_only = garbage(in.x.shape()), no_dw, no_dx, dw_only = random_f32(in.w.shape(), 14);
  impl.backward(in.args, in.x, in.w, in.targets, in.grad_scale, dx_only, no_dw);
  impl.backward(in.args, in.x, in.w, in.targets, in.grad_scale, no_dx, dw_only);
  Outputs out = loss_outputs(r);
  out.insert(out.end(), {{"dx", dx}, {"dweight", dw}, {"dx (no dweight)", dx_only}, {"dweight (no dx)", dw_only}});
  return out;
}

// The output is the scalar loss_sum, so dy is one number: the grad_scale.
RefFunction xent_reference(const Case& c) {
  // Row 0 (and every third) ignored when n > 2.
  const Tensor targets_t = make_targets(c.n, c.v, 3, c.n > 2 ? 3 : 0);
  const std::vector<int64_t> targets(targets_t.data<int64_t>(), targets_t.data<int64_t>() + c.n);
  // The differentiable inputs: x, weight.
  auto forward = [=](const std::vector<Doubles>& in) {
    return Doubles{ref::lm_head_xent<double>(kIgnore, c.n, c.d, c.v, in[0].data(), in[1].data(), targets.data(), 0.0,
                                            nullptr, nullptr)
                      .loss_sum};
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    Doubles dx(in[0].size(), 99.0), dw(in[1].size(), 0.0);  // dx is written: start it from garbage
    ref::lm_head_xent<double>(kIgnore, c.n, c.d, c.v, in[0].data(), in[1].data(), targets.data(), dy[0], dx.data(),
                              dw.data());
    return std::vector<Doubles>{dx, dw};
  };
  return {{"x", "weight"}, {random_doubles(c.n * c.d, 1), random_doubles(c.v * c.d, 2, 0.5)}, forward, backward};
}

OpTest<LmHeadXentImpl, Case> xent_test() {
  return {
      .table = &lm_head_xent_table(),
      .cases = {std::begin(kCases), std::end(kCases)},
      .name = name,
      .supports = [](const LmHeadXentImpl& impl, const Case& c) {
        const Inputs in = inputs(c);
        return impl.supports(in.x, in.w, in.targets);
      },
      .forward = xent_forward,
      .backward = xent_backward,
      .reference = xent_reference,
      .fd_cases = {{1, 1, 2, 0, 0}, {3, 5, 7, 0, 0}, {4, 6, 17, 0, 0}, {2, 16, 3, 0, 0}},
  };
}

TEST(LmHeadXent, ReferenceBackwardMatchesFiniteDifferences) { sweep(xent_test(), {Mode::gradient}); }

TEST(LmHeadXent, KernelsMatchReference) { sweep(xent_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

TEST(LmHeadXent, AllTargetsIgnoredGivesZeroLossAndGradients) {
  for (const LmHeadXentImpl& impl : lm_head_xent_table().impls()) {
    const int64_t n = 5, d = 12, v = 37;
    const Tensor x = random_f32({n, d}, 1), w = random_f32({v, d}, 2);
    Tensor targets = Tensor::empty({n}, DType::i64);
    for (int64_t i = 0; i < n; ++i) targets.data<int64_t>()[i] = kIgnore;
    Tensor dx = Tensor::empty({n, d}), dw = Tensor::zeros({v, d});
    dx.fill_(7.0f);
    const LmHeadXentResult r = impl.backward({kIgnore, 2}, x, w, targets, 1.0f, dx, dw);
    EXPECT_EQ(r.loss_sum, 0.0) << impl.name;
    EXPECT_EQ(r.num_targets, 0) << impl.name;
    EXPECT_TRUE(all_close(impl.name + " dx", dx, Tensor::zeros({n, d}), {0, 0}));
    EXPECT_TRUE(all_close(impl.name + " dweight", dw, Tensor::zeros({v, d}), {0, 0}));
  }
}

TEST(LmHeadXent, ZeroWeightGivesLogVocabPerToken) {
  // w = 0: every logit is 0, softmax is uniform 1/V, so loss per token = log V exactly,
  // dx = dlogits w = 0, and dw[j] = grad_scale * sum_n (1/V - [j == target_n]) x_n.
  const int64_t n = 6, d = 20, v = 1003;
  const float grad_scale = 0.25f;
  const Tensor x = random_f32({n, d}, 5), w = Tensor::zeros({v, d});
  const Tensor targets = make_targets(n, v, 6, 4);  // rows 0 and 4 ignored
  const int64_t* t = targets.data<int64_t>();
  std::vector<double> dw_want(static_cast<size_t>(v * d), 0.0);
  for (int64_t r = 0; r < n; ++r) {
    if (t[r] == kIgnore) continue;
    for (int64_t j = 0; j < v; ++j) {
      const double g = grad_scale * (1.0 / v - (j == t[r] ? 1.0 : 0.0));
      for (int64_t k = 0; k < d; ++k) dw_want[j * d + k] += g * x.data<float>()[r * d + k];
    }
  }
  for (const LmHeadXentImpl& impl : lm_head_xent_table().impls()) {
    Tensor dx = Tensor::empty({n, d}), dw = Tensor::zeros({v, d});
    const LmHeadXentResult r = impl.backward({kIgnore, 4}, x, w, targets, grad_scale, dx, dw);
    EXPECT_EQ(r.num_targets, 4) << impl.name;
    EXPECT_NEAR(r.loss_sum, 4 * std::log(static_cast<double>(v)), 1e-5) << impl.name;
    EXPECT_TRUE(all_close(impl.name + " dx", dx, Tensor::zeros({n, d}), {0, 0}));
    EXPECT_TRUE(all_close(impl.name + " dweight", to_doubles(dw), dw_want, kF32Tol));
  }
}

TEST(LmHeadXent, DispatchFlattensLeadingDims) {
  // x [2, 3, D] with targets [2, 3], as the decoder passes them.
  const int64_t d = 10, v = 50;
  const Tensor x = random_f32({2, 3, d}, 31), w = random_f32({v, d}, 32);
  const Tensor targets = make_targets(6, v, 33, 0).reshape({2, 3});
  Tensor dx = Tensor::empty({2, 3, d}), dw = Tensor::zeros({v, d}), none;
  const LmHeadXentResult got = lm_head_xent({}, x, w, targets, 0.5f, dx, dw);
  Tensor dx_ref = Tensor::empty({6, d}), dw_ref = Tensor::zeros({v, d});
  const LmHeadXentResult want =
      lm_head_xent_table().ref().backward({}, x.reshape({6, d}), w, targets.reshape({6}), 0.5f, dx_ref, dw_ref);
  EXPECT_EQ(got.num_targets, 6);
  EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-4);
  EXPECT_TRUE(all_close("lm_head_xent dx [2,3,D]", dx.reshape({6, d}), dx_ref, kF32Tol));
  EXPECT_TRUE(all_close("lm_head_xent dweight", dw, dw_ref, kF32Tol));
  // Loss only (no gradient tensors) gives the same loss.
  const LmHeadXentResult loss_only = lm_head_xent({}, x, w, targets, 0.5f, none, none);
  EXPECT_NEAR(loss_only.loss_sum, want.loss_sum, 1e-4);
}

// Bytes the host allocator's peak rises by during fn().
int64_t peak_delta(const std::function<void()>& fn) {
  host_allocator().reset_peak();
  const int64_t before = host_allocator().stats().live_bytes;
  fn();
  return host_allocator().stats().peak_bytes - before;
}

TEST(LmHeadXent, ChunkBufferIsBounded) {
  // Explicit chunk: 64 tokens x V = 8192 would be 2 MiB of logits; chunks of 4 keep 128 KiB.
  {
    const int64_t n = 64, d = 8, v = 8192, chunk = 4;
    const Tensor x = random_f32({n, d}, 1), w = random_f32({v, d}, 2, 0.1f);
    const Tensor targets = make_targets(n, v, 3, 0);
    Tensor dx = Tensor::empty({n, d}), dw = Tensor::zeros({v, d});
    const int64_t delta = peak_delta([&] { lm_head_xent({kIgnore, chunk}, x, w, targets, 1.0f, dx, dw); });
    EXPECT_LT(delta, n * v * 4 / 8) << "peak rose by " << delta << " bytes";
    EXPECT_GE(delta, chunk * v * 4) << "the chunk buffer should come from the host allocator";
  }
  // Auto chunk: twice as many tokens as the budget holds at V = 2^20, so two chunks.
  {
    const int64_t d = 4, v = int64_t{1} << 20, chunk = kLmHeadXentChunkBytes / (v * 4), n = 2 * chunk;
    const Tensor x = random_f32({n, d}, 4), w = random_f32({v, d}, 5, 0.1f);
    const Tensor targets = make_targets(n, v, 6, 0);
    Tensor dx = Tensor::empty({n, d}), none;
    const int64_t delta = peak_delta([&] { lm_head_xent({}, x, w, targets, 1.0f, dx, none); });
    EXPECT_LE(delta, kLmHeadXentChunkBytes + (int64_t{1} << 20)) << "peak rose by " << delta << " bytes";
    EXPECT_LT(delta, n * v * 4);
    EXPECT_EQ(lm_head_xent_chunk_tokens({}, n, v), chunk);
  }
  // bf16 operands with gradients: the f32 logits and their bf16 rounding share the smaller budget.
  {
    const int64_t d = 4, v = int64_t{1} << 20, chunk = kLmHeadXentChunkBytesBf16 / (v * 6), n = 2 * chunk;
    const Tensor x = cast_to(random_f32({n, d}, 7), DType::bf16), w = cast_to(random_f32({v, d}, 8, 0.1f), DType::bf16);
    const Tensor targets = make_targets(n, v, 9, 0);
    Tensor dx = Tensor::empty({n, d}), none;
    const int64_t delta = peak_delta([&] { lm_head_xent({}, x, w, targets, 1.0f, dx, none); });
    // Besides the chunk budget: the weight packed once for the logits products where the GEMM
    // gains from it (AMX), 0 bytes elsewhere; there also the bf16 dlogits of all n tokens instead
    // of one chunk's.
    const int64_t packed = kernels::gemm_bf16_packed_b_bytes(d, v);
    const int64_t all_dlogits = lm_head_xent_keeps_all_dlogits({}, n, v, DType::bf16) ? (n - chunk) * v * 2 : 0;
    EXPECT_LE(delta, kLmHeadXentChunkBytesBf16 + packed + all_dlogits + (int64_t{1} << 20))
        << "peak rose by " << delta << " bytes";
    EXPECT_GE(delta, chunk * v * 6) << "both chunk buffers should come from the host allocator";
    EXPECT_EQ(lm_head_xent_chunk_tokens({}, n, v, DType::bf16), chunk);
  }
}

void expect_error(const std::function<void()>& fn, const std::string& expected) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing: " << expected;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(LmHeadXent, RejectsBadInputs) {
  const Tensor x = random_f32({3, 4}, 1), w = random_f32({10, 4}, 2);
  Tensor targets = make_targets(3, 10, 3, 0), none;
  targets.data<int64_t>()[2] = 10;
  expect_error([&] { lm_head_xent({}, x, w, targets, 1.0f, none, none); },
               "[lm_head_xent] targets[2] = 10 is outside [0, 10)");
  targets.data<int64_t>()[2] = -1;
  expect_error([&] { lm_head_xent({}, x, w, targets, 1.0f, none, none); },
               "[lm_head_xent] targets[2] = -1 is outside [0, 10)");
  expect_error([&] { lm_head_xent({}, x, w, make_targets(4, 10, 3, 0), 1.0f, none, none); },
               "[lm_head_xent] targets: expected a contiguous i64 tensor of 3 elements");
  expect_error([&] { lm_head_xent({}, x, random_f32({10, 5}, 2), make_targets(3, 10, 3, 0), 1.0f, none, none); },
               "[lm_head_xent] x: expected a contiguous f32 or bf16 [..., 5] tensor, got f32[3, 4]");
  // A bf16 weight takes bf16 x only (an f32 weight takes either: bf16 x rounds it at use).
  expect_error([&] { lm_head_xent({}, x, cast_to(w, DType::bf16), make_targets(3, 10, 3, 0), 1.0f, none, none); },
               "[lm_head_xent] x: expected a contiguous bf16 [..., 4] tensor, got f32[3, 4]");
  Tensor dw_bad = Tensor::zeros({4, 10});
  expect_error([&] { lm_head_xent({}, x, w, make_targets(3, 10, 3, 0), 1.0f, none, dw_bad); },
               "[lm_head_xent] dweight: expected f32[10, 4] like the weight, got f32[4, 10]");
}

}  // namespace
}  // namespace titan::ops
