// A sequence run in two chunks, the second at offset positions attending to the first's keys and
// values (nn/sequence_attention.h), equals the sequence run whole: the decoder's logits on the HF
// fixtures, and one attention layer's output and gradients against the whole-sequence op.
#include <gtest/gtest.h>

#include "ops/op_harness.h"
#include "titan/models/builtin.h"
#include "titan/nn/sequence_attention.h"

namespace titan {
namespace {

using testing::all_close;
using testing::random_f32;

std::unique_ptr<nn::Decoder> load(const std::string& fixture) {
  const std::string dir = testing::source_path("tests/fixtures/" + fixture);
  return models::load_hf_model(models::family_of_hf_folder(dir), dir);
}

// Columns [from, to) of dim 1 of a [B, T, ...] tensor, contiguous.
Tensor cols(const Tensor& x, int64_t from, int64_t to) { return x.narrow(1, from, to - from).contiguous(); }

Tensor iota_from(int64_t B, int64_t from, int64_t to) {
  Tensor p = Tensor::empty({B, to - from}, DType::i64);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = from; t < to; ++t) p.data<int64_t>()[b * (to - from) + t - from] = t;
  }
  return p;
}

class SequenceChunks : public ::testing::TestWithParam<const char*> {};

// Tokens [0, 9) whole, and as [0, 4) then [4, 9) at positions 4..8 over the first chunk's keys.
TEST_P(SequenceChunks, TwoChunksEqualTheWholeSequence) {
  std::unique_ptr<nn::Decoder> model = load(GetParam());
  const int64_t B = 2, T = 9, P = 4;
  Tensor ids = Tensor::empty({B, T}, DType::i64);
  for (int64_t i = 0; i < B * T; ++i) ids.data<int64_t>()[i] = (i * 37 + 11) % model->config().vocab_size;
  const Tensor want = model->forward_logits(ids);
  nn::KvRecorder first;
  const Tensor got_first = model->forward_logits(cols(ids, 0, P), Tensor(), &first);
  nn::PrefixAttention rest(first);
  const Tensor got_rest = model->forward_logits(cols(ids, P, T), iota_from(B, P, T), &rest);
  EXPECT_TRUE(all_close("first chunk", got_first, cols(want, 0, P), {2e-5, 2e-5}));
  EXPECT_TRUE(all_close("second chunk", got_rest, cols(want, P, T), {2e-5, 2e-5}));
  // Without the prefix the second chunk is another sequence: the test can fail.
  const Tensor alone = model->forward_logits(cols(ids, P, T), iota_from(B, P, T));
  EXPECT_FALSE(all_close("second chunk alone", alone, cols(want, P, T), {2e-5, 2e-5}));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SequenceChunks,
                         ::testing::Values("hf/untied_gqa2", "hf/tied_mha", "hf_moe/e8_top2_norm"));

TEST(SequenceChunks, RecurrentLayersRefuseAPrefix) {
  std::unique_ptr<nn::Decoder> model = load("hf_qwen3_5/text");
  nn::KvRecorder first;
  const Tensor ids = Tensor::zeros({1, 4}, DType::i64);
  EXPECT_NE(testing::error_of([&] { model->forward_logits(ids, Tensor(), &first); })
                .find("linear-attention (DeltaNet) layers whose state would restart"),
            std::string::npos);
}

// One layer's attention: the chunk's output and its q, k, v gradients through PrefixAttention
// equal the whole sequence's rows P.. (keys at P.. are seen by queries at P.. only, so with the
// loss on those rows the whole sequence's gradients of them are the chunk's).
TEST(SequenceChunks, PrefixAttentionGradientsEqualTheWholeSequence) {
  const int64_t B = 2, T = 150, P = 61, H = 4, G = 2, K = 16;
  const Tensor q = random_f32({B, T, H, K}, 1), k = random_f32({B, T, G, K}, 2), v = random_f32({B, T, G, K}, 3);
  Tensor dout = random_f32({B, T, H, K}, 4);
  for (int64_t b = 0; b < B; ++b) std::fill_n(dout.data<float>() + b * T * H * K, P * H * K, 0.0f);
  Tensor out = Tensor::empty(q.shape()), dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()),
         dv = Tensor::empty(v.shape());
  ops::AttentionSaved saved;
  ops::attention_forward({}, q, k, v, out, saved);
  ops::attention_backward({}, dout, Tensor(), q, k, v, out, saved, dq, dk, dv);

  nn::KvRecorder first;
  std::any first_saved, rest_saved;
  Tensor first_out = Tensor::empty({B, P, H, K});
  first.forward("layer", {}, cols(q, 0, P), cols(k, 0, P), cols(v, 0, P), first_out, first_saved);
  nn::PrefixAttention rest(first);
  const Tensor qc = cols(q, P, T), kc = cols(k, P, T), vc = cols(v, P, T);
  Tensor out_c = Tensor::empty(qc.shape()), dq_c = Tensor::empty(qc.shape()), dk_c = Tensor::empty(kc.shape()),
         dv_c = Tensor::empty(vc.shape());
  rest.forward("layer", {}, qc, kc, vc, out_c, rest_saved);
  rest.backward("layer", {}, cols(dout, P, T), qc, kc, vc, out_c, rest_saved, dq_c, dk_c, dv_c);
  EXPECT_TRUE(all_close("out", out_c, cols(out, P, T), testing::kF32Tol));
  EXPECT_TRUE(all_close("dq", dq_c, cols(dq, P, T), testing::kF32Tol));
  EXPECT_TRUE(all_close("dk", dk_c, cols(dk, P, T), testing::kF32Tol));
  EXPECT_TRUE(all_close("dv", dv_c, cols(dv, P, T), testing::kF32Tol));
}

}  // namespace
}  // namespace titan
