// Generation pieces below the CLI: the KV-cache forward against the whole-sequence forward on the
// HF fixtures (dense, tied, MoE; incremental decode and left padding), and the token picker against
// the math of greedy, top-k and top-p sampling.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/op_harness.h"
#include "titan/models/builtin.h"
#include "titan/nn/generate.h"

namespace titan {
namespace {

using testing::all_close;
using testing::source_path;

std::unique_ptr<nn::Decoder> load(const std::string& fixture) {
  const std::string dir = source_path("tests/fixtures/" + fixture);
  return models::load_hf_model(models::family_of_hf_folder(dir), dir);
}

Tensor ids_of(const std::vector<std::vector<int64_t>>& rows) {
  Tensor t = Tensor::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())}, DType::i64);
  for (size_t b = 0; b < rows.size(); ++b) std::copy(rows[b].begin(), rows[b].end(), t.data<int64_t>() + b * rows[0].size());
  return t;
}

// Rows [b] of logits_BSV from position `from` on, as [S - from, V].
std::vector<double> slice(const Tensor& logits_BSV, int64_t b, int64_t from, int64_t to) {
  const int64_t S = logits_BSV.size(1), V = logits_BSV.size(2);
  const float* p = logits_BSV.data<float>() + (b * S + from) * V;
  return std::vector<double>(p, p + (to - from) * V);
}

class CachedForward : public ::testing::TestWithParam<const char*> {};

// Prefill 5 tokens, then one token per call: every position's logits equal forward_logits of the
// whole sequence to f32 rounding.
TEST_P(CachedForward, IncrementalDecodeEqualsWholeSequence) {
  std::unique_ptr<nn::Decoder> model = load(GetParam());
  model->prepare_inference(DType::f32);
  const Tensor ids = ids_of({{5, 17, 3, 99, 42, 7, 8, 120, 1, 64, 33}, {100, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}});
  const int64_t B = 2, T = 11, P = 5, V = model->config().vocab_size;
  const Tensor want = model->forward_logits(ids);
  nn::KvCache cache = model->make_kv_cache({0, 0}, T + 3);
  Tensor prefill = Tensor::empty({B, P}, DType::i64);
  for (int64_t b = 0; b < B; ++b) std::copy_n(ids.data<int64_t>() + b * T, P, prefill.data<int64_t>() + b * P);
  const Tensor got_prefill = model->forward_cached(prefill, cache, false);
  for (int64_t b = 0; b < B; ++b) {
    EXPECT_TRUE(all_close(str("prefill row ", b), slice(got_prefill, b, 0, P), slice(want, b, 0, P), {2e-5, 2e-5}));
  }
  for (int64_t t = P; t < T; ++t) {
    Tensor one = Tensor::empty({B, 1}, DType::i64);
    for (int64_t b = 0; b < B; ++b) one.data<int64_t>()[b] = ids.data<int64_t>()[b * T + t];
    const Tensor got = model->forward_cached(one, cache, true);
    ASSERT_EQ(got.shape(), (Shape{B, 1, V}));
    for (int64_t b = 0; b < B; ++b) {
      EXPECT_TRUE(all_close(str("step ", t, " row ", b), slice(got, b, 0, 1), slice(want, b, t, t + 1), {2e-5, 2e-5}));
    }
  }
  EXPECT_EQ(cache.length, T);
}

// A row left-padded by 4 slots computes what it computes alone.
TEST_P(CachedForward, LeftPaddedRowEqualsTheRowAlone) {
  std::unique_ptr<nn::Decoder> model = load(GetParam());
  model->prepare_inference(DType::f32);
  const std::vector<int64_t> row = {9, 8, 7, 6, 5, 4, 3};
  const Tensor want = model->forward_logits(ids_of({row}));
  const Tensor batch = ids_of({{0, 0, 0, 0, 9, 8, 7, 6, 5, 4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}});
  nn::KvCache cache = model->make_kv_cache({4, 0}, 11);
  const Tensor got = model->forward_cached(batch, cache, false);
  EXPECT_TRUE(all_close("padded row", slice(got, 0, 4, 11), slice(want, 0, 0, 7), {2e-5, 2e-5}));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CachedForward,
                         ::testing::Values("hf/untied_gqa2", "hf/tied_mha", "hf_moe/e8_top2_norm", "hf_qwen3_5/text"));

// bf16 weights converted once: the cached decode tracks the f32 whole-sequence logits loosely
// (bf16 rounding), and no f32 master or gradient is left.
TEST(CachedForwardBf16, WeightsConvertedOnceAndLogitsClose) {
  std::unique_ptr<nn::Decoder> ref = load("hf/untied_gqa2");
  std::unique_ptr<nn::Decoder> model = load("hf/untied_gqa2");
  model->prepare_inference(DType::bf16);
  for (nn::Parameter* p : model->parameters()) {
    EXPECT_FALSE(p->value.defined()) << p->fqn;
    EXPECT_FALSE(p->grad.defined()) << p->fqn;
    EXPECT_EQ(p->compute.dtype(), DType::bf16) << p->fqn;
  }
  const Tensor ids = ids_of({{5, 17, 3, 99, 42, 7}});
  const Tensor want = ref->forward_logits(ids);
  nn::KvCache cache = model->make_kv_cache({0}, 6);
  const Tensor got = model->forward_cached(ids, cache, false);
  EXPECT_TRUE(all_close("bf16", slice(got, 0, 0, 6), slice(want, 0, 0, 6), {0.05, 0.05}));
}

// --- the token picker ---

const std::vector<float> kLogits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};

// Frequencies over M evenly spaced draws u = (i + 1/2) / M: the picker inverts the kept
// distribution's CDF, so each token's share is its probability to within 1/M.
std::vector<double> frequencies(const nn::SamplingConfig& s, int64_t M = 10000) {
  std::vector<double> f(kLogits.size(), 0.0);
  std::vector<std::pair<float, int64_t>> scratch;
  for (int64_t i = 0; i < M; ++i) {
    const float u = (static_cast<float>(i) + 0.5f) / static_cast<float>(M);
    f[static_cast<size_t>(nn::pick_token(kLogits.data(), 4, s, u, scratch))] += 1.0 / static_cast<double>(M);
  }
  return f;
}

TEST(PickToken, GreedyTopK1AndTinyTopPAreTheArgmax) {
  std::vector<std::pair<float, int64_t>> scratch;
  const std::vector<float> logits = {0.1f, 2.0f, -1.0f, 2.0f, 1.5f};  // a tie: the first wins, as torch.argmax
  nn::SamplingConfig greedy;
  greedy.temperature = 0.0f;
  nn::SamplingConfig top1;
  top1.top_k = 1;
  nn::SamplingConfig tiny_p;
  tiny_p.top_p = 1e-6f;
  for (float u : {0.0f, 0.3f, 0.999f}) {
    EXPECT_EQ(nn::pick_token(logits.data(), 5, greedy, u, scratch), 1);
    EXPECT_EQ(nn::pick_token(logits.data(), 5, top1, u, scratch), 1);
    EXPECT_EQ(nn::pick_token(logits.data(), 5, tiny_p, u, scratch), 1);
  }
}

// A temperature so small that logits / T overflow float (1e-45 is a denormal): softmax(inf - inf)
// would be NaN, which picked the least likely token. The limit of softmax(x / T) as T -> 0 is the
// argmax, so the picker is greedy there, whatever the draw, also when every logit is negative
// (x / T = -inf for all of them) and with top-k / top-p on.
TEST(PickToken, ATemperatureWhoseLogitsOverflowIsGreedy) {
  std::vector<std::pair<float, int64_t>> scratch;
  const std::vector<float> mixed = {0.5f, 3.0f, -2.0f, 2.5f};
  const std::vector<float> negative = {-4.0f, -1.0f, -3.0f, -2.0f};
  for (float t : {1e-45f, 1e-40f}) {
    nn::SamplingConfig s;
    s.temperature = t;
    nn::SamplingConfig truncated = s;
    truncated.top_k = 3;
    truncated.top_p = 0.9f;
    for (float u : {0.0f, 0.5f, 0.999f}) {
      EXPECT_EQ(nn::pick_token(mixed.data(), 4, s, u, scratch), 1) << "T=" << t << " u=" << u;
      EXPECT_EQ(nn::pick_token(negative.data(), 4, s, u, scratch), 1) << "T=" << t << " u=" << u;
      EXPECT_EQ(nn::pick_token(mixed.data(), 4, truncated, u, scratch), 1) << "T=" << t << " u=" << u;
    }
  }
}

TEST(PickToken, SamplesTheSoftmaxAndItsTruncations) {
  nn::SamplingConfig plain;
  EXPECT_TRUE(all_close("T=1", frequencies(plain), {0.5, 0.3, 0.15, 0.05}, {2e-4, 0.0}));
  nn::SamplingConfig top2;
  top2.top_k = 2;
  EXPECT_TRUE(all_close("top_k=2", frequencies(top2), {0.625, 0.375, 0.0, 0.0}, {2e-4, 0.0}));
  nn::SamplingConfig top_p;  // 0.5 < 0.7: the second token stays; 0.8 >= 0.7: the third does not
  top_p.top_p = 0.7f;
  EXPECT_TRUE(all_close("top_p=0.7", frequencies(top_p), {0.625, 0.375, 0.0, 0.0}, {2e-4, 0.0}));
  nn::SamplingConfig hot;  // temperature 2: p_i proportional to sqrt(p_i)
  hot.temperature = 2.0f;
  const double z = std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.15) + std::sqrt(0.05);
  EXPECT_TRUE(all_close("T=2", frequencies(hot),
                        {std::sqrt(0.5) / z, std::sqrt(0.3) / z, std::sqrt(0.15) / z, std::sqrt(0.05) / z}, {2e-4, 0.0}));
}

}  // namespace
}  // namespace titan
