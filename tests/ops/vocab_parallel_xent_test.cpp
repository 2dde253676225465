// Vocabulary-parallel cross-entropy (max, sums, combine): every kernel against the reference bit
// for bit (the contract fixes the arithmetic), and from math: a [C, V] logits matrix cut into 2 or
// 3 vocabulary shards, with the all-reduces done here on the host, gives the loss and gradient of
// the whole matrix (long double log-sum-exp; the fused lm_head_xent op on an identity weight); the
// fp64 reference's gradient against finite differences; one-line errors.
#include "titan/ops/vocab_parallel_xent/vocab_parallel_xent.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/op_harness.h"
#include "titan/core/rng.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

constexpr int64_t kIgnore = -100;

// One rank's slice: logits [c, v] for the global ids [vocab_start, vocab_start + v). Targets run
// over a global vocabulary of vocab_start + v + 9 ids, so some fall before, in and after the slice;
// every `ignore_every`-th one (if > 0) is ignored. For the gradient mode, v is the whole
// vocabulary, cut into `shards` slices.
struct Case {
  int64_t c, v, vocab_start, ignore_every;
  int shards = 2;
};
// One row and many; v = 1, below, at and above 16 and odd; row counts around the 16-row thread
// grain (so 1, 2 and 3 threads split them differently).
const Case kCases[] = {{1, 1, 0, 0},   {1, 16, 0, 0},    {3, 5, 7, 2},    {17, 33, 0, 3},
                       {40, 16, 20, 4}, {100, 257, 300, 5}, {33, 100, 50, 0}, {64, 7, 3, 7}};

std::string name(const Case& c) {
  return str("c=", c.c, " v=", c.v, " vocab_start=", c.vocab_start, " ignore_every=", c.ignore_every);
}

Tensor make_targets(const Case& c, int64_t global_v, uint64_t seed) {
  Tensor t = Tensor::empty({c.c}, DType::i64);
  int64_t* p = t.data<int64_t>();
  Rng(seed).fill_int(p, c.c, global_v);
  for (int64_t i = 1; i < c.c; i += 3) p[i] = c.vocab_start + (i * 5) % c.v;  // some surely in the slice
  if (c.ignore_every > 0) {
    for (int64_t i = 0; i < c.c; i += c.ignore_every) p[i] = kIgnore;
  }
  return t;
}

struct Inputs {
  VocabParallelXentArgs args;
  Tensor logits, targets, max, stats;
};

// The slice's logits; a global max above the local one and global sums larger than the local ones
// (as other ranks' columns make them), built with the reference so every implementation sees the
// same values.
Inputs inputs(const Case& c) {
  Inputs in{{kIgnore, c.vocab_start}, random_f32({c.c, c.v}, 21, 4.0f), make_targets(c, c.vocab_start + c.v + 9, 22),
            Tensor::empty({c.c}, DType::f64), Tensor::empty({c.c, 2}, DType::f64)};
  double* m = in.max.data<double>();
  ref::vocab_parallel_xent_max<float>(c.c, c.v, in.logits.data<float>(), m);
  // Another rank holds the row max; not an f32 value, so every rounding in the contract shows.
  for (int64_t i = 0; i < c.c; i += 2) m[i] += 0.7390851332151607;
  ref::vocab_parallel_xent_sums<float>(in.args, c.c, c.v, in.logits.data<float>(), in.targets.data<int64_t>(), m,
                                       in.stats.data<double>());
  double* s = in.stats.data<double>();
  for (int64_t i = 0; i < c.c; ++i) {
    s[2 * i] += 0.3 + 0.01 * static_cast<double>(i);
    if (s[2 * i + 1] == 0.0) s[2 * i + 1] = -1.25;  // the target logit from the rank holding it
  }
  return in;
}

// ---- Kernels against the reference --------------------------------------------------------------

template <class Impl>
void expect_ref_then_cpu(const OpTable<Impl>& table) {
  ASSERT_EQ(table.impls().size(), 2u) << table.op_name();
  EXPECT_EQ(table.ref().name, table.op_name() + "_ref");
  EXPECT_EQ(table.impls()[1].name, table.op_name() + "_cpu");
}

TEST(VocabParallelXent, EveryImplementationIsRegistered) {
  expect_ref_then_cpu(vocab_parallel_xent_max_table());
  expect_ref_then_cpu(vocab_parallel_xent_sums_table());
  expect_ref_then_cpu(vocab_parallel_xent_combine_table());
}

const std::vector<int> kThreads = {1, 2, 3};

OpTest<VocabParallelXentMaxImpl, Case> max_test() {
  return {.table = &vocab_parallel_xent_max_table(),
          .cases = {std::begin(kCases), std::end(kCases)},
          .name = name,
          .forward = [](const VocabParallelXentMaxImpl& impl, const Case& c) -> Outputs {
            const Inputs in = inputs(c);
            Tensor max = Tensor::empty({c.c}, DType::f64);
            impl.forward(in.logits, max);
            return {{"max", max, kExact}};
          },
          .threads = kThreads};
}

OpTest<VocabParallelXentSumsImpl, Case> sums_test() {
  return {.table = &vocab_parallel_xent_sums_table(),
          .cases = {std::begin(kCases), std::end(kCases)},
          .name = name,
          .forward = [](const VocabParallelXentSumsImpl& impl, const Case& c) -> Outputs {
            const Inputs in = inputs(c);
            Tensor stats = Tensor::empty({c.c, 2}, DType::f64);
            std::fill_n(stats.data<double>(), 2 * c.c, std::nan(""));  // every entry is written
            impl.forward(in.args, in.logits, in.targets, in.max, stats);
            return {{"stats", stats, kExact}};
          },
          .threads = kThreads};
}

// The loss accumulates into the caller's running result: every run starts from the same non-zero one.
const LmHeadXentResult kRunning{2.5, 3};

Outputs loss_outputs(const LmHeadXentResult& r) {
  return {{"loss_sum", r.loss_sum, kExact}, {"num_targets", static_cast<double>(r.num_targets), kExact}};
}

// The whole vocabulary's loss (and, with dlogits, gradient) from `shards` slices of the fp64
// reference, the all-reduces done here: max over the slices, sums added in slice order.
double sharded_reference(const Doubles& logits, int64_t c, int64_t v, int shards, const std::vector<int64_t>& targets,
                         double grad_scale, Doubles* dlogits) {
  std::vector<int64_t> bounds;
  for (int k = 0; k <= shards; ++k) bounds.push_back(v * k / shards);
  std::vector<Doubles> slices;
  for (int k = 0; k < shards; ++k) {
    Doubles s;
    for (int64_t i = 0; i < c; ++i) s.insert(s.end(), logits.begin() + i * v + bounds[k], logits.begin() + i * v + bounds[k + 1]);
    slices.push_back(s);
  }
  Doubles max(c, -std::numeric_limits<double>::infinity()), stats(2 * c, 0.0);
  for (int k = 0; k < shards; ++k) {
    Doubles m(c);
    ref::vocab_parallel_xent_max<double>(c, bounds[k + 1] - bounds[k], slices[k].data(), m.data());
    for (int64_t i = 0; i < c; ++i) max[i] = std::max(max[i], m[i]);
  }
  for (int k = 0; k < shards; ++k) {
    Doubles s(2 * c);
    ref::vocab_parallel_xent_sums<double>({kIgnore, bounds[k]}, c, bounds[k + 1] - bounds[k], slices[k].data(),
                                          targets.data(), max.data(), s.data());
    for (int64_t i = 0; i < 2 * c; ++i) stats[i] += s[i];
  }
  LmHeadXentResult result;
  for (int k = 0; k < shards; ++k) {
    LmHeadXentResult r;
    const int64_t w = bounds[k + 1] - bounds[k];
    ref::vocab_parallel_xent_combine<double>({kIgnore, bounds[k]}, c, w, targets.data(), max.data(), stats.data(),
                                             dlogits != nullptr ? slices[k].data() : nullptr, grad_scale, r);
    result = r;  // every slice computes the same loss from the same global statistics
    if (dlogits == nullptr) continue;
    for (int64_t i = 0; i < c; ++i) {
      std::copy(slices[k].begin() + i * w, slices[k].begin() + (i + 1) * w, dlogits->begin() + i * v + bounds[k]);
    }
  }
  return result.loss_sum;
}

// The output is the scalar loss_sum, so dy is one number: the grad_scale.
RefFunction combined_reference(const Case& c) {
  const Tensor t = make_targets({c.c, c.v, 0, c.ignore_every}, c.v, 23);
  const std::vector<int64_t> targets(t.data<int64_t>(), t.data<int64_t>() + c.c);
  auto forward = [=](const std::vector<Doubles>& in) {
    return Doubles{sharded_reference(in[0], c.c, c.v, c.shards, targets, 0.0, nullptr)};
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    Doubles dlogits(in[0].size(), 99.0);  // written: start from garbage
    sharded_reference(in[0], c.c, c.v, c.shards, targets, dy[0], &dlogits);
    return std::vector<Doubles>{dlogits};
  };
  return {{"logits"}, {random_doubles(c.c * c.v, 24, 3.0)}, forward, backward};
}

OpTest<VocabParallelXentCombineImpl, Case> combine_test() {
  return {.table = &vocab_parallel_xent_combine_table(),
          .cases = {std::begin(kCases), std::end(kCases)},
          .name = name,
          .forward = [](const VocabParallelXentCombineImpl& impl, const Case& c) -> Outputs {
            const Inputs in = inputs(c);
            LmHeadXentResult r = kRunning;
            impl.forward(in.args, in.targets, in.max, in.stats, r);
            return loss_outputs(r);
          },
          .backward = [](const VocabParallelXentCombineImpl& impl, const Case& c) -> Outputs {
            Inputs in = inputs(c);
            LmHeadXentResult r = kRunning;
            impl.backward(in.args, in.logits, in.targets, in.max, in.stats, 0.0625f, r);
            Outputs out = loss_outputs(r);
            out.emplace_back("dlogits", in.logits, kExact);
            return out;
          },
          .threads = kThreads,
          .reference = combined_reference,
          .fd_cases = {{1, 2, 0, 0, 2}, {3, 7, 0, 0, 3}, {4, 10, 0, 3, 2}, {5, 12, 0, 2, 3}}};
}

TEST(VocabParallelXent, MaxKernelsMatchReferenceBitForBit) { sweep(max_test(), {Mode::forward}); }
TEST(VocabParallelXent, SumsKernelsMatchReferenceBitForBit) { sweep(sums_test(), {Mode::forward}); }
TEST(VocabParallelXent, CombineKernelsMatchReferenceBitForBit) {
  sweep(combine_test(), {Mode::forward, Mode::backward});
}
TEST(VocabParallelXent, ShardedReferenceGradientMatchesFiniteDifferences) { sweep(combine_test(), {Mode::gradient}); }

// ---- From math: shards combine to the whole vocabulary -------------------------------------------

struct Sharded {
  LmHeadXentResult result;
  Tensor dlogits;  // [C, V], the slices side by side
};

// The three ops through dispatch on each slice of `bounds`; the all-reduces done here (max, then
// sums added in slice order). Every slice must report the same loss.
Sharded run_sharded(const Tensor& logits, const Tensor& targets, const std::vector<int64_t>& bounds, float grad_scale) {
  const int64_t c = logits.size(0), v = logits.size(1);
  const size_t shards = bounds.size() - 1;
  std::vector<Tensor> slices, maxes, stats;
  Tensor max = Tensor::empty({c}, DType::f64), sum = Tensor::zeros({c, 2}, DType::f64);
  for (int64_t i = 0; i < c; ++i) max.data<double>()[i] = -std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < shards; ++k) {
    // clone: the whole-width slice is a view of logits, and combine overwrites it.
    slices.push_back(logits.narrow(1, bounds[k], bounds[k + 1] - bounds[k]).contiguous().clone());
    maxes.push_back(Tensor::empty({c}, DType::f64));
    vocab_parallel_xent_max(slices[k], maxes[k]);
    for (int64_t i = 0; i < c; ++i) max.data<double>()[i] = std::max(max.data<double>()[i], maxes[k].data<double>()[i]);
  }
  for (size_t k = 0; k < shards; ++k) {
    stats.push_back(Tensor::empty({c, 2}, DType::f64));
    vocab_parallel_xent_sums({kIgnore, bounds[k]}, slices[k], targets, max, stats[k]);
    for (int64_t i = 0; i < 2 * c; ++i) sum.data<double>()[i] += stats[k].data<double>()[i];
  }
  Sharded out{{}, Tensor::empty({c, v})};
  for (size_t k = 0; k < shards; ++k) {
    LmHeadXentResult r;
    vocab_parallel_xent_combine({kIgnore, bounds[k]}, slices[k], targets, max, sum, grad_scale, true, r);
    if (k == 0) out.result = r;
    EXPECT_EQ(r.loss_sum, out.result.loss_sum) << "slice " << k;
    EXPECT_EQ(r.num_targets, out.result.num_targets) << "slice " << k;
    for (int64_t i = 0; i < c; ++i) {
      for (int64_t j = bounds[k]; j < bounds[k + 1]; ++j) {
        out.dlogits.data<float>()[i * v + j] = slices[k].data<float>()[i * (bounds[k + 1] - bounds[k]) + j - bounds[k]];
      }
    }
  }
  return out;
}

TEST(VocabParallelXent, ShardsGiveTheLossAndGradientOfTheWholeVocabulary) {
  const int64_t c = 13, v = 50;
  const float grad_scale = 0.125f;
  Tensor logits = random_f32({c, v}, 31, 3.0f);
  // Row 5: a large spread (exp(500) overflows a double), its max in the last slice.
  for (int64_t j = 0; j < v; ++j) logits.data<float>()[5 * v + j] = j < 40 ? -500.0f + j : 500.0f - j;
  // Targets in every slice of every split below, and ignored ones.
  const int64_t ids[c] = {0, 24, 25, 49, kIgnore, 45, 16, 17, 18, kIgnore, 33, 1, 48};
  Tensor targets = Tensor::empty({c}, DType::i64);
  std::copy(ids, ids + c, targets.data<int64_t>());

  // Long double: loss_i = log sum_j exp(z_ij - m_i) + m_i - z_it; dlogits = (softmax - onehot) * scale.
  long double loss_want = 0;
  std::vector<double> dlogits_want(c * v, 0.0);
  for (int64_t i = 0; i < c; ++i) {
    if (ids[i] == kIgnore) continue;
    const float* z = logits.data<float>() + i * v;
    const long double m = *std::max_element(z, z + v);
    long double s = 0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(static_cast<long double>(z[j]) - m);
    loss_want += std::log(s) + m - z[ids[i]];
    for (int64_t j = 0; j < v; ++j) {
      dlogits_want[i * v + j] =
          static_cast<double>((std::exp(static_cast<long double>(z[j]) - m) / s - (j == ids[i] ? 1 : 0)) * grad_scale);
    }
  }
  // The fused op on an identity weight: logits = x I^T = x and dx = dlogits I = dlogits, exactly.
  Tensor eye = Tensor::zeros({v, v});
  for (int64_t j = 0; j < v; ++j) eye.data<float>()[j * v + j] = 1.0f;
  Tensor dx_fused = Tensor::empty({c, v}), dw_fused = Tensor::zeros({v, v});
  const LmHeadXentResult fused = lm_head_xent({}, logits, eye, targets, grad_scale, dx_fused, dw_fused);

  for (const bool reference : {false, true}) {
    set_use_ref(reference);
    for (const std::vector<int64_t>& bounds :
         {std::vector<int64_t>{0, 25, 50}, std::vector<int64_t>{0, 17, 18, 50}, std::vector<int64_t>{0, 50}}) {
      const std::string where = str(reference ? "reference" : "dispatch", " slices=", bounds.size() - 1);
      const Sharded got = run_sharded(logits, targets, bounds, grad_scale);
      EXPECT_EQ(got.result.num_targets, 11) << where;
      EXPECT_NEAR(got.result.loss_sum, static_cast<double>(loss_want), 1e-12 * static_cast<double>(loss_want)) << where;
      EXPECT_TRUE(all_close(where + " dlogits vs long double", to_doubles(got.dlogits), dlogits_want, {1e-9, 1e-6}));
      EXPECT_NEAR(got.result.loss_sum, fused.loss_sum, 1e-4) << where << " vs lm_head_xent";
      EXPECT_TRUE(all_close(where + " dlogits vs lm_head_xent", got.dlogits, dx_fused, kF32Tol));
    }
  }
  set_use_ref(false);
}

TEST(VocabParallelXent, AllTargetsIgnoredGiveNoLossAndZeroGradient) {
  const Tensor logits = random_f32({4, 9}, 41);
  Tensor targets = Tensor::empty({4}, DType::i64);
  for (int64_t i = 0; i < 4; ++i) targets.data<int64_t>()[i] = kIgnore;
  const Sharded got = run_sharded(logits, targets, {0, 4, 9}, 1.0f);
  EXPECT_EQ(got.result.loss_sum, 0.0);
  EXPECT_EQ(got.result.num_targets, 0);
  EXPECT_TRUE(all_close("dlogits", got.dlogits, Tensor::zeros({4, 9}), kExact));
}

// Loss only (grads = false) accumulates the same loss and leaves the logits alone.
TEST(VocabParallelXent, LossOnlyLeavesTheLogits) {
  const Case c{6, 11, 0, 4};
  Inputs in = inputs(c);
  const Tensor before = in.logits.clone();
  LmHeadXentResult loss_only = kRunning, with_grads = kRunning;
  vocab_parallel_xent_combine(in.args, in.logits, in.targets, in.max, in.stats, 1.0f, false, loss_only);
  EXPECT_TRUE(all_close("logits", in.logits, before, kExact));
  vocab_parallel_xent_combine(in.args, in.logits, in.targets, in.max, in.stats, 1.0f, true, with_grads);
  EXPECT_EQ(loss_only.loss_sum, with_grads.loss_sum);
  EXPECT_EQ(loss_only.num_targets, kRunning.num_targets + 4);  // rows 0 and 4 ignored
}

TEST(VocabParallelXent, RejectsBadTensorsWithOneLineErrors) {
  const Tensor logits = random_f32({3, 5}, 51), targets = Tensor::zeros({3}, DType::i64);
  Tensor max_f32 = Tensor::empty({3}), max = Tensor::empty({3}, DType::f64), stats = Tensor::empty({3, 2}, DType::f64);
  Tensor stats_flat = Tensor::empty({6}, DType::f64);
  LmHeadXentResult r;
  const std::string max_error = error_of([&] { vocab_parallel_xent_max(logits, max_f32); });
  EXPECT_NE(max_error.find("[vocab_parallel_xent_max] max: expected a contiguous f64 [3] tensor on cpu (one per row "
                           "of logits f32[3, 5]), got f32[3] on cpu. HINT:"),
            std::string::npos)
      << max_error;
  EXPECT_EQ(max_error.find('\n'), std::string::npos);
  EXPECT_NE(error_of([&] { vocab_parallel_xent_sums({}, logits, Tensor::zeros({4}, DType::i64), max, stats); })
                .find("[vocab_parallel_xent_sums] targets: expected a contiguous i64 tensor of 3 elements (one per row "
                      "of logits f32[3, 5]), got i64[4] on cpu"),
            std::string::npos);
  EXPECT_NE(error_of([&] { vocab_parallel_xent_sums({}, logits, targets, max, stats_flat); })
                .find("[vocab_parallel_xent_sums] stats: expected a contiguous f64 [3, 2] tensor, got f64[6] on cpu"),
            std::string::npos);
  Tensor cols = random_f32({3, 10}, 52).narrow(1, 0, 5);
  EXPECT_NE(error_of([&] { vocab_parallel_xent_combine({}, cols, targets, max, stats, 1.0f, true, r); })
                .find("[vocab_parallel_xent_combine] logits: expected a contiguous f32 [tokens, vocab] tensor with "
                      "vocab > 0, got f32[3, 5] on cpu, non-contiguous"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
