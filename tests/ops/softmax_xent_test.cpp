// Fused lm_head + cross-entropy: case list for the shared harness, plus math and memory checks.
#include "titan/ops/softmax_xent/softmax_xent.h"

#include <cmath>

#include "ops/op_harness.h"
#include "titan/core/rng.h"

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

TEST(LmHeadXent, ReferenceBackwardMatchesFiniteDifferences) {
  struct Small { int64_t n, d, v; };
  for (const Small& c : {Small{1, 1, 2}, Small{3, 5, 7}, Small{4, 6, 17}, Small{2, 16, 3}}) {
    const double grad_scale = 0.7;
    const auto x0 = random_doubles(c.n * c.d, 1);
    const auto w0 = random_doubles(c.v * c.d, 2, 0.5);
    const Tensor targets = make_targets(c.n, c.v, 3, c.n > 2 ? 3 : 0);  // row 0 ignored when n > 2
    const int64_t* t = targets.data<int64_t>();
    auto loss = [&](const std::vector<double>& x, const std::vector<double>& w) {
      return grad_scale * ref::lm_head_xent<double>(kIgnore, c.n, c.d, c.v, x.data(), w.data(), t,
                                                    0.0, nullptr, nullptr).loss_sum;
    };
    std::vector<double> dx(x0.size(), 99.0), dw(w0.size(), 0.0);
    ref::lm_head_xent<double>(kIgnore, c.n, c.d, c.v, x0.data(), w0.data(), t, grad_scale,
                              dx.data(), dw.data());
    const std::string where = str("lm_head_xent_ref n=", c.n, " d=", c.d, " v=", c.v);
    EXPECT_TRUE(all_close(where + " dx", dx,
                          numeric_gradient([&](const auto& x) { return loss(x, w0); }, x0), kFdTol));
    EXPECT_TRUE(all_close(where + " dweight", dw,
                          numeric_gradient([&](const auto& w) { return loss(x0, w); }, w0), kFdTol));
  }
}

TEST(LmHeadXent, KernelsMatchReference) {
  const LmHeadXentImpl& ref = lm_head_xent_table().ref();
  for (const LmHeadXentImpl& impl : lm_head_xent_table().impls()) {
    for (const Case& c : kCases) {
      const Tensor x = random_f32({c.n, c.d}, 11), w = random_f32({c.v, c.d}, 12, 0.3f);
      const Tensor targets = make_targets(c.n, c.v, 13, c.ignore_every);
      if (impl.supports && !impl.supports(x, w, targets)) continue;
      const std::string where = impl.name + " " + name(c);
      const LmHeadXentArgs args{kIgnore, c.chunk_tokens};
      const float grad_scale = 1.0f / static_cast<float>(std::max<int64_t>(1, c.n));

      const LmHeadXentResult fwd_ref = ref.forward(args, x, w, targets);
      const LmHeadXentResult fwd = impl.forward(args, x, w, targets);
      EXPECT_EQ(fwd.num_targets, fwd_ref.num_targets) << where;
      EXPECT_EQ(fwd.num_targets, count_targets(targets)) << where;
      EXPECT_NEAR(fwd.loss_sum, fwd_ref.loss_sum, 1e-4 + 1e-5 * std::fabs(fwd_ref.loss_sum)) << where;

      // dweight accumulates: start both from the same non-zero values; dx is overwritten.
      Tensor dx_ref = Tensor::empty(x.shape()), dx = Tensor::empty(x.shape());
      dx.fill_(123.0f);
      Tensor dw_ref = random_f32(w.shape(), 14), dw = dw_ref.clone();
      const LmHeadXentResult bwd_ref = ref.backward(args, x, w, targets, grad_scale, dx_ref, dw_ref);
      const LmHeadXentResult bwd = impl.backward(args, x, w, targets, grad_scale, dx, dw);
      EXPECT_EQ(bwd.num_targets, bwd_ref.num_targets) << where;
      EXPECT_NEAR(bwd.loss_sum, bwd_ref.loss_sum, 1e-4 + 1e-5 * std::fabs(bwd_ref.loss_sum)) << where;
      EXPECT_NEAR(bwd.loss_sum, fwd.loss_sum, 1e-4 + 1e-5 * std::fabs(fwd.loss_sum)) << where;
      EXPECT_TRUE(all_close(where + " dx", dx, dx_ref, kF32Tol));
      EXPECT_TRUE(all_close(where + " dweight", dw, dw_ref, kF32Tol));

      // Only one of the gradients: the same values.
      Tensor dx_only = Tensor::empty(x.shape()), no_dw, no_dx, dw_only = random_f32(w.shape(), 14);
      impl.backward(args, x, w, targets, grad_scale, dx_only, no_dw);
      impl.backward(args, x, w, targets, grad_scale, no_dx, dw_only);
      EXPECT_TRUE(all_close(where + " dx (no dweight)", dx_only, dx_ref, kF32Tol));
      EXPECT_TRUE(all_close(where + " dweight (no dx)", dw_only, dw_ref, kF32Tol));
    }
  }
}

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
               "[lm_head_xent] x: expected a contiguous f32 [..., 5] tensor, got f32[3, 4]");
  Tensor dw_bad = Tensor::zeros({4, 10});
  expect_error([&] { lm_head_xent({}, x, w, make_targets(3, 10, 3, 0), 1.0f, none, dw_bad); },
               "[lm_head_xent] dweight: expected f32[10, 4] like the weight, got f32[4, 10]");
}

}  // namespace
}  // namespace titan::ops
