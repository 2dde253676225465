// Activation checkpointing and micro-batch-safe blocks, from identities:
//  - every recompute choice (keep_all, keep_ops, keep_input, and a mix) gives the same loss and the
//    same gradients bit for bit, dense and MoE (aux-loss and bias balancing), with and without a
//    q/k norm, and counts each micro-batch's expert load once;
//  - a block holds several micro-batches at once: two forwards, then the two backwards in reverse
//    order, give each micro-batch's input gradient bit for bit and the summed parameter gradients
//    of running them one after the other;
//  - torchtitan's mode / selective_ac_option map onto the per-layer choices; bad values are
//    one-line errors naming the field.
#include <gtest/gtest.h>

#include <cstring>

#include "ops/op_harness.h"
#include "titan/core/rng.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/weights.h"

namespace titan::nn {
namespace {

using testing::error_of;

DecoderConfig tiny(bool moe, bool qk_norm, LoadBalance balance) {
  DecoderConfig c = models::find_size(moe ? "debug_moe" : "debug").config;
  c.vocab_size = 96;
  c.dim = 32;
  c.num_layers = 4;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.hidden_dim = 40;
  c.qk_norm = qk_norm;
  if (moe) {
    c.num_experts = 4;
    c.num_experts_per_tok = 2;
    c.moe_hidden_dim = 16;
    c.decoder_sparse_step = 2;  // layers 1 and 3 sparse: dense and MoE blocks both recompute
    c.load_balance = balance;
  }
  return c;
}

Tensor random_ids(int64_t b, int64_t t, int64_t vocab, uint64_t seed) {
  Tensor ids = Tensor::empty({b, t}, DType::i64);
  Rng(seed).fill_int(ids.data<int64_t>(), b * t, vocab);
  return ids;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && std::memcmp(a.data<float>(), b.data<float>(), a.numel() * sizeof(float)) == 0;
}

struct TrainedRun {
  LossResult loss;
  std::vector<Tensor> grads;
  ExpertLoad load;
};

// Two micro-batches accumulated into the gradients, as the trainer runs them.
TrainedRun train_once(const DecoderConfig& c, const std::vector<Recompute>& recompute) {
  Decoder model(c);
  models::init_weights(model, 11);
  if (!recompute.empty()) model.set_recompute(recompute);
  TrainedRun run;
  for (uint64_t micro = 0; micro < 2; ++micro) {
    const Tensor ids = random_ids(2, 16, c.vocab_size, 20 + micro), targets = random_ids(2, 16, c.vocab_size, 30 + micro);
    run.loss = model.forward_backward(ids, targets, 1.0f / 64, 0.5f);
  }
  for (Parameter* p : model.parameters()) run.grads.push_back(p->grad.clone());
  run.load = model.expert_load();
  return run;
}

// The reduced Qwen3.5 shape at the tiny sizes: layers [linear, linear, linear, full] (gated DeltaNet
// beside output-gated, partial-RoPE attention), zero-centred norms; with `moe`, every MLP 4 experts
// plus the sigmoid-gated shared expert.
DecoderConfig tiny_qwen3_5(bool moe) {
  DecoderConfig c = tiny(false, true, LoadBalance::none);
  const DecoderConfig q = models::find_size("debug_qwen3_5").config;
  c.layer_types = q.layer_types;
  c.linear_num_key_heads = 2;
  c.linear_key_head_dim = 8;
  c.linear_num_value_heads = 4;
  c.linear_value_head_dim = 8;
  c.partial_rotary_factor = 0.5f;
  c.attn_output_gate = c.zero_centered_norms = true;
  if (moe) {
    c.num_experts = 4;
    c.num_experts_per_tok = 2;
    c.moe_hidden_dim = 16;
    c.shared_expert_dim = 24;
    c.load_balance = LoadBalance::aux_loss;
  }
  return c;
}

TEST(ActivationCheckpoint, EveryChoiceTrainsTheSameBits) {
  struct Case {
    const char* name;
    bool moe, qk_norm;
    LoadBalance balance;
    bool qwen3_5 = false;
  };
  const Case cases[] = {{"dense", false, true, LoadBalance::none},
                        {"dense_no_qk_norm", false, false, LoadBalance::none},
                        {"moe_aux_loss", true, true, LoadBalance::aux_loss},
                        {"moe_bias", true, true, LoadBalance::bias},
                        {"qwen3_5", false, true, LoadBalance::none, true},
                        {"qwen3_5_moe", true, true, LoadBalance::aux_loss, true}};
  using R = Recompute;
  const std::vector<std::vector<R>> choices = {{R::keep_ops, R::keep_ops, R::keep_ops, R::keep_ops},
                                               {R::keep_input, R::keep_input, R::keep_input, R::keep_input},
                                               {R::keep_all, R::keep_input, R::keep_ops, R::keep_input}};
  for (const Case& k : cases) {
    const DecoderConfig c = k.qwen3_5 ? tiny_qwen3_5(k.moe) : tiny(k.moe, k.qk_norm, k.balance);
    const TrainedRun want = train_once(c, {});
    for (size_t i = 0; i < choices.size(); ++i) {
      SCOPED_TRACE(std::string(k.name) + ", choice " + std::to_string(i));
      const TrainedRun got = train_once(c, choices[i]);
      EXPECT_EQ(std::memcmp(&got.loss.loss, &want.loss.loss, sizeof(double)), 0) << got.loss.loss << " vs " << want.loss.loss;
      EXPECT_EQ(got.loss.sum(kAuxLossTerm), want.loss.sum(kAuxLossTerm));
      ASSERT_EQ(got.grads.size(), want.grads.size());
      for (size_t p = 0; p < want.grads.size(); ++p) EXPECT_TRUE(same_bits(got.grads[p], want.grads[p])) << "gradient " << p;
      EXPECT_EQ(got.load.min, want.load.min);  // a replayed forward does not count its tokens again
      EXPECT_EQ(got.load.max, want.load.max);
    }
  }
}

TEST(ActivationCheckpoint, ABlockHoldsSeveralMicroBatches) {
  const DecoderConfig c = tiny(false, true, LoadBalance::none);
  for (const Recompute r : {Recompute::keep_all, Recompute::keep_ops, Recompute::keep_input}) {
    SCOPED_TRACE(static_cast<int>(r));
    Decoder sequential(c), interleaved(c);
    models::init_weights(sequential, 5);
    models::init_weights(interleaved, 5);
    TransformerBlock& a = *sequential.layers[0];
    TransformerBlock& b = *interleaved.layers[0];
    StepContext ctx;
    ctx.batch = 1;
    ctx.seq = 8;
    ctx.positions_N = Tensor::empty({8}, DType::i64);
    for (int64_t t = 0; t < 8; ++t) ctx.positions_N.data<int64_t>()[t] = t;
    ctx.rope = ops::rope_tables({c.rope_theta, c.rope_scaling}, ctx.positions_N, c.head_dim);
    const Tensor x0 = testing::random_f32({8, c.dim}, 1), x1 = testing::random_f32({8, c.dim}, 2);
    const Tensor dy0 = testing::random_f32({8, c.dim}, 3), dy1 = testing::random_f32({8, c.dim}, 4);
    RouterTotals totals;
    TransformerBlock::Saved s0, s1;
    // One after the other.
    a.forward(ctx, x0, s0, r, &totals);
    const Tensor dx0_want = a.backward(ctx, dy0, s0);
    a.forward(ctx, x1, s1, r, &totals);
    const Tensor dx1_want = a.backward(ctx, dy1, s1);
    // Both in flight, backward in reverse order (a pipeline stage's 1F1B does this).
    TransformerBlock::Saved t0, t1;
    b.forward(ctx, x0, t0, r, &totals);
    b.forward(ctx, x1, t1, r, &totals);
    const Tensor dx1 = b.backward(ctx, dy1, t1);
    const Tensor dx0 = b.backward(ctx, dy0, t0);
    EXPECT_TRUE(same_bits(dx0, dx0_want));
    EXPECT_TRUE(same_bits(dx1, dx1_want));
    ParameterList pa, pb;
    a.collect(pa);
    b.collect(pb);
    // The same two contributions summed in the other order: equal to fp32 rounding.
    for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(testing::all_close(pa[i]->fqn, pb[i]->grad, pa[i]->grad, {1e-6, 1e-5}));
  }
}

TEST(ActivationCheckpoint, TorchtitanFieldsMapOntoLayers) {
  using R = Recompute;
  EXPECT_EQ(recompute_per_layer("none", "op", 3), std::vector<R>(3, R::keep_all));
  EXPECT_EQ(recompute_per_layer("full", "2", 3), std::vector<R>(3, R::keep_input));
  EXPECT_EQ(recompute_per_layer("selective", "op", 2), std::vector<R>(2, R::keep_ops));
  // torchtitan counts blocks from 1: with N = 2 the 2nd and 4th are checkpointed.
  EXPECT_EQ(recompute_per_layer("selective", "2", 5),
            (std::vector<R>{R::keep_all, R::keep_input, R::keep_all, R::keep_input, R::keep_all}));
  EXPECT_EQ(recompute_per_layer("selective", "1", 2), std::vector<R>(2, R::keep_input));
  EXPECT_EQ(recompute_per_layer("selective", "0", 2), std::vector<R>(2, R::keep_input));
  EXPECT_NE(error_of([] { recompute_per_layer("partial", "op", 2); }).find("mode 'partial'"),
            std::string::npos);
  for (const char* bad : {"", "-1", "2x", "ops", "99999999999"}) {
    EXPECT_NE(error_of([&] { recompute_per_layer("selective", bad, 2); }).find("selective_ac_option"), std::string::npos)
        << bad;
  }
}

}  // namespace
}  // namespace titan::nn
