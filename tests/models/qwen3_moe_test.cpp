// Mixture-of-experts at the model level, from identities and torchtitan's update rule (the numbers
// against Transformers are qwen3_hf_parity_test's hf_moe cases):
//  - one expert with top-1 is the dense SwiGLU MLP: same loss and gradients, zero router gradient;
//  - which layers are sparse (decoder_sparse_step, mlp_only_layers), parameter counts, HF names;
//  - bias balancing: the selection bias update and that it evens the expert loads;
//  - bad MoE configurations are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ops/op_harness.h"
#include "titan/core/parallel.h"
#include "titan/core/rng.h"
#include "titan/models/decoder/hf_names.h"
#include "titan/models/decoder/weights.h"
#include "titan/models/qwen3/specs.h"

namespace titan::qwen3 {

using namespace titan::models;  // the shared decoder machinery the Qwen3 family is built on
namespace {

nn::Linear& as_linear(const std::unique_ptr<nn::LinearModule>& m) { return dynamic_cast<nn::Linear&>(*m); }


using testing::error_of;

nn::DecoderConfig tiny_dense() {
  nn::DecoderConfig c = find_spec("debug").config;
  c.vocab_size = 96;
  c.dim = 32;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  c.hidden_dim = 40;
  return c;
}

Tensor random_ids(int64_t b, int64_t t, int64_t vocab, uint64_t seed) {
  Tensor ids = Tensor::empty({b, t}, DType::i64);
  Rng(seed).fill_int(ids.data<int64_t>(), b * t, vocab);
  return ids;
}

Tensor next_token_targets(const Tensor& ids) {
  const int64_t B = ids.size(0), T = ids.size(1);
  Tensor out = Tensor::empty({B, T}, DType::i64);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) out.data<int64_t>()[b * T + t] = t + 1 < T ? ids.data<int64_t>()[b * T + t + 1] : -100;
  }
  return out;
}

TEST(MoeModel, OneExpertTopOneEqualsTheDenseMlp) {
  const nn::DecoderConfig dense_config = tiny_dense();
  for (const bool norm : {true, false}) {
    nn::DecoderConfig moe_config = dense_config;
    moe_config.num_experts = 1;
    moe_config.num_experts_per_tok = 1;
    moe_config.moe_hidden_dim = dense_config.hidden_dim;
    moe_config.norm_topk_prob = norm;  // softmax over one expert is 1 either way
    moe_config.load_balance = nn::LoadBalance::aux_loss;  // aux = E * 1 * 1 = 1, constant: no gradient
    nn::Decoder dense(dense_config), moe(moe_config);
    init_weights(dense, 7);
    init_weights(moe, 8);
    // Same weights: everything shared by FQN, the expert from the dense MLP; the router stays random.
    const nn::ParameterList dp = dense.parameters();
    for (nn::Parameter* p : moe.parameters()) {
      for (nn::Parameter* q : dp) {
        if (q->fqn == p->fqn) p->value.copy_from(q->value);
      }
    }
    for (size_t i = 0; i < moe.layers.size(); ++i) {
      auto& ff = dynamic_cast<nn::FeedForward&>(*dense.layers[i]->feed_forward);
      auto& m = dynamic_cast<nn::Experts&>(*dynamic_cast<nn::Moe&>(*moe.layers[i]->moe).experts);
      m.w1.value.select(0).copy_from(as_linear(ff.w1).weight.value);
      m.w2.value.select(0).copy_from(as_linear(ff.w2).weight.value);
      m.w3.value.select(0).copy_from(as_linear(ff.w3).weight.value);
    }
    const Tensor ids = random_ids(2, 9, dense_config.vocab_size, 3), targets = next_token_targets(ids);
    dense.zero_grad();
    moe.zero_grad();
    const nn::LossResult ld = dense.forward_backward(ids, targets);
    const nn::LossResult lm = moe.forward_backward(ids, targets);
    EXPECT_NEAR(lm.sum(nn::kAuxLossTerm), 1.0, 1e-6);
    EXPECT_NEAR(lm.loss, ld.loss + moe_config.router_aux_loss_coef, 1e-6);
    const double ce = ld.sum(nn::kCrossEntropyTerm);
    EXPECT_NEAR(lm.sum(nn::kCrossEntropyTerm), ce, 1e-5 * std::fabs(ce));
    for (nn::Parameter* p : moe.parameters()) {
      if (p->fqn.find(".moe.") == std::string::npos) {
        for (nn::Parameter* q : dp) {
          if (q->fqn == p->fqn) {
            EXPECT_TRUE(testing::all_close(p->fqn, p->grad, q->grad, {1e-6, 1e-4}));
          }
        }
      }
    }
    for (size_t i = 0; i < moe.layers.size(); ++i) {
      auto& ff = dynamic_cast<nn::FeedForward&>(*dense.layers[i]->feed_forward);
      auto& block = dynamic_cast<nn::Moe&>(*moe.layers[i]->moe);
      auto& m = dynamic_cast<nn::Experts&>(*block.experts);
      auto& r = dynamic_cast<nn::Router&>(*block.router);
      EXPECT_TRUE(testing::all_close("w1", m.w1.grad.select(0), as_linear(ff.w1).weight.grad, {1e-6, 1e-4}));
      EXPECT_TRUE(testing::all_close("w2", m.w2.grad.select(0), as_linear(ff.w2).weight.grad, {1e-6, 1e-4}));
      EXPECT_TRUE(testing::all_close("w3", m.w3.grad.select(0), as_linear(ff.w3).weight.grad, {1e-6, 1e-4}));
      const float* dr = r.gate.grad.data<float>();
      EXPECT_TRUE(std::all_of(dr, dr + r.gate.grad.numel(), [](float g) { return g == 0.0f; }))
          << "the router cannot change a softmax over one expert";
    }
  }
}

// The loss terms a decoder returns (nn/loss_terms.h) and the rule each carries: cross-entropy per
// target with weight 1, and with aux-loss balancing HF's aux loss per forward weighted by
// router_aux_loss_coef; a call's loss is ce / targets + coef * aux to the bit, as before terms.
TEST(MoeModel, LossTermsCarryTheirRule) {
  nn::DecoderConfig c = tiny_dense();
  EXPECT_EQ(nn::Decoder(c).loss_terms().size(), 1u);
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_hidden_dim = 16;
  c.load_balance = nn::LoadBalance::aux_loss;
  c.router_aux_loss_coef = 0.01f;
  nn::Decoder model(c);
  init_weights(model, 3);
  const std::vector<nn::LossTerm> terms = model.loss_terms();
  ASSERT_EQ(terms.size(), 2u);
  EXPECT_EQ(terms[0].name, nn::kCrossEntropyTerm);
  EXPECT_EQ(terms[0].denominator, nn::LossDenominator::targets);
  EXPECT_EQ(terms[0].weight, 1.0);
  EXPECT_EQ(terms[1].name, nn::kAuxLossTerm);
  EXPECT_EQ(terms[1].denominator, nn::LossDenominator::forwards);
  EXPECT_EQ(terms[1].weight, static_cast<double>(0.01f));
  const Tensor ids = random_ids(2, 9, c.vocab_size, 4), targets = next_token_targets(ids);
  model.zero_grad();
  const nn::LossResult r = model.forward_backward(ids, targets);
  EXPECT_EQ(r.num_targets, 16);
  EXPECT_GT(r.sum(nn::kAuxLossTerm), 0.0);
  EXPECT_EQ(r.sum("mtp"), 0.0);  // a term the model does not have
  EXPECT_EQ(r.loss, r.sum(nn::kCrossEntropyTerm) / 16.0 + c.router_aux_loss_coef * r.sum(nn::kAuxLossTerm));
  const nn::LossResult f = model.forward_loss(ids, targets);
  ASSERT_EQ(f.terms.size(), 2u);
  EXPECT_NEAR(f.sum(nn::kAuxLossTerm), r.sum(nn::kAuxLossTerm), 1e-12);
  // Two forwards' sums add term by term; their loss takes the aux term per forward.
  nn::LossResult both{0.0, 0, model.loss_terms()};
  both.add(r);
  both.add(r);
  EXPECT_EQ(both.num_targets, 32);
  EXPECT_EQ(both.mean(2), r.loss);
}

TEST(MoeModel, SparseLayersCountsAndHfNames) {
  nn::DecoderConfig c = tiny_dense();
  c.num_layers = 6;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_hidden_dim = 12;
  c.decoder_sparse_step = 2;   // layers 1, 3, 5 ...
  c.mlp_only_layers = {3};     // ... but 3 stays dense
  nn::Decoder model(c);
  std::vector<int64_t> sparse;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const bool is_moe = model.layers[static_cast<size_t>(i)]->moe != nullptr;
    EXPECT_EQ(is_moe, model.layers[static_cast<size_t>(i)]->feed_forward == nullptr);
    if (is_moe) sparse.push_back(i);
  }
  EXPECT_EQ(sparse, (std::vector<int64_t>{1, 5}));
  int64_t stored = 0;
  size_t hf_tensors = 0;
  for (nn::Parameter* p : model.parameters()) {
    stored += p->value.numel();
    for (const auto& [name, t] : to_hf_tensors(p->fqn, p->value)) {
      ++hf_tensors;
      EXPECT_EQ(from_hf_name(name), p->fqn) << name;
    }
  }
  EXPECT_EQ(stored, c.num_params());
  // Per sparse layer: router + 3 x 4 expert tensors instead of 3 dense ones.
  EXPECT_EQ(hf_tensors, model.parameters().size() + 2 * (1 + 3 * 4 - 4));
  EXPECT_EQ(to_hf_tensors("layers.5.moe.experts.w2", dynamic_cast<nn::Experts&>(*dynamic_cast<nn::Moe&>(*model.layers[5]->moe).experts).w2.value)[3].first,
            "model.layers.5.mlp.experts.3.down_proj.weight");
  EXPECT_EQ(to_hf_name("layers.5.moe.router.gate.weight"), "model.layers.5.mlp.gate.weight");
  // Active parameters: a token meets 2 of the 4 experts in each sparse layer.
  EXPECT_EQ(c.num_params() - c.num_active_params(), 2 * 2 * 3 * c.dim * c.moe_hidden_dim);
}

// num_moe_layers is a closed form (the memory check calls it for a config.json's 1e9 layers):
// it counts what is_moe_layer says layer by layer, duplicate and out-of-range mlp_only_layers
// included.
TEST(MoeModel, SparseLayerCountIsTheLayerByLayerCount) {
  nn::DecoderConfig c = tiny_dense();
  c.num_experts = 4;
  for (const std::vector<int64_t>& dense : {std::vector<int64_t>{}, {3}, {3, 3, 1}, {0, 2, 4, 99, -1}}) {
    c.mlp_only_layers = dense;
    for (int64_t step = 0; step <= 3; ++step) {
      c.decoder_sparse_step = step;
      for (int64_t layers = 0; layers <= 7; ++layers) {
        c.num_layers = layers;
        int64_t want = 0;
        for (int64_t i = 0; i < layers; ++i) want += c.is_moe_layer(i);
        EXPECT_EQ(c.num_moe_layers(), want) << "step " << step << ", " << layers << " layers";
      }
    }
  }
  c.num_experts = 0;
  EXPECT_EQ(c.num_moe_layers(), 0);
}

TEST(MoeModel, BiasBalancingUpdateAndItEvensTheLoad) {
  // One MoE layer (dim 16, 4 experts of width 8, top-1), built from its config tree.
  nn::DecoderConfig c = find_spec("debug_moe").config;
  c.dim = 16;
  c.num_layers = 1;
  c.num_experts = 4;
  c.num_experts_per_tok = 1;
  c.moe_hidden_dim = 8;
  c.load_balance = nn::LoadBalance::bias;
  const nn::ConfigTree tree = nn::decoder_config_tree(c);
  nn::Moe moe(dynamic_cast<const nn::MoeConfig&>(*tree.at("model.layers.0.moe")),
              nn::ModuleBuild(nn::module_registry(), tree, "model.layers.0.moe"));
  auto& router = dynamic_cast<nn::Router&>(*moe.router);
  auto& experts = dynamic_cast<nn::Experts&>(*moe.experts);
  EXPECT_EQ(router.expert_bias.fqn, "layers.0.moe.expert_bias") << "the checkpoint name of the bias is unchanged";
  Rng(5).fill_normal(router.gate.value.data<float>(), router.gate.value.numel(), 0.0f, 0.3f);
  for (nn::Parameter* p : {&experts.w1, &experts.w2, &experts.w3}) Rng(6).fill_normal(p->value.data<float>(), p->value.numel(), 0.0f, 0.1f);
  Tensor x = Tensor::empty({256, 16});
  Rng(7).fill_normal(x.data<float>(), x.numel(), 0.0f, 1.0f);
  // Skew the router so expert 2 takes most tokens.
  for (int64_t d = 0; d < 16; ++d) router.gate.value.data<float>()[2 * 16 + d] *= 3.0f;

  auto spread = [&] {
    std::fill(moe.load().begin(), moe.load().end(), 0);
    std::any saved;
    nn::RouterTotals totals;
    moe.forward(x, saved, &totals);
    const auto& load = moe.load();
    return *std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end());
  };
  const int64_t before = spread();
  const std::vector<int64_t> load = moe.load();
  // torchtitan: delta = rate * sign(mean - load), minus its mean.
  moe.update_expert_bias(0.01);
  double mean = 0.0;
  for (int64_t l : load) mean += static_cast<double>(l) / 4.0;
  double sum = 0.0;
  std::vector<double> sign(4);
  for (size_t j = 0; j < 4; ++j) sign[j] = (mean > static_cast<double>(load[j])) - (mean < static_cast<double>(load[j]));
  const double sign_mean = (sign[0] + sign[1] + sign[2] + sign[3]) / 4.0;
  for (size_t j = 0; j < 4; ++j) {
    EXPECT_NEAR(router.expert_bias.value.data<float>()[j], 0.01 * (sign[j] - sign_mean), 1e-7) << j;
    sum += router.expert_bias.value.data<float>()[j];
  }
  EXPECT_NEAR(sum, 0.0, 1e-7);
  for (int i = 0; i < 200; ++i) {
    spread();
    moe.update_expert_bias(0.01);
  }
  const int64_t after = spread();
  std::printf("[ balance  ] max - min tokens per expert (256 tokens, 4 experts, top-1): %ld before, %ld after 200 "
              "updates\n", static_cast<long>(before), static_cast<long>(after));
  EXPECT_GT(before, 50) << "the skewed router should be unbalanced to start with";
  EXPECT_LT(after, before / 4) << "bias balancing should even the load: spread " << before << " -> " << after;
  EXPECT_FALSE(router.expert_bias.grad.defined()) << "the bias is a buffer, not a parameter";
}

// bf16 compute on the debug MoE model: one and two threads agree to summation-order noise (the
// grouped expert GEMMs' tiles, attention's tiles and gemm_bf16's oneDNN products run concurrently
// on two). This caught concurrent oneDNN products sharing the library's scratchpad and stream,
// which corrupted some products: gradients then differed by ~1e-1 of their size.
TEST(MoeModel, Bf16StepAgreesOnOneAndTwoThreads) {
  const nn::DecoderConfig config = find_spec("debug_moe").config;
  const Tensor ids = random_ids(4, 256, config.vocab_size, 3), targets = next_token_targets(ids);
  std::vector<Tensor> grads[2];
  double loss[2] = {};
  const int before = num_threads();
  for (const int threads : {1, 2}) {
    set_num_threads(threads);
    nn::Decoder model(config);
    init_weights(model, 5);
    model.set_compute_dtype(DType::bf16);
    model.zero_grad();
    loss[threads - 1] = model.forward_backward(ids, targets).loss;
    for (const nn::Parameter* p : model.parameters()) grads[threads - 1].push_back(p->grad.clone());
  }
  set_num_threads(before);
  EXPECT_NEAR(loss[0], loss[1], 1e-6 * loss[0]);
  ASSERT_EQ(grads[0].size(), grads[1].size());
  for (size_t i = 0; i < grads[0].size(); ++i) {
    double diff = 0.0, size = 0.0;
    for (int64_t j = 0; j < grads[0][i].numel(); ++j) {
      const double a = grads[0][i].data<float>()[j], b = grads[1][i].data<float>()[j];
      diff += std::fabs(a - b);
      size += std::fabs(a);
    }
    EXPECT_LE(diff, 1e-4 * size) << "parameter " << i;
  }
}

TEST(MoeModel, BadConfigurationsAreOneLineErrors) {
  nn::DecoderConfig c = find_spec("debug_moe").config;
  c.validate();
  nn::DecoderConfig bad = c;
  bad.num_experts_per_tok = 9;
  std::string msg = error_of([&] { bad.validate(); });
  EXPECT_NE(msg.find("num_experts_per_tok (top_k) = 9 must be in [1, num_experts = 8]"), std::string::npos) << msg;
  bad = c;
  bad.moe_hidden_dim = 0;
  msg = error_of([&] { bad.validate(); });
  EXPECT_NE(msg.find("moe_hidden_dim"), std::string::npos) << msg;
  bad = c;
  bad.mlp_only_layers = {0, 1, 2, 3};
  msg = error_of([&] { bad.validate(); });
  EXPECT_NE(msg.find("no layer is sparse"), std::string::npos) << msg;
  bad = c;
  bad.mlp_only_layers = {7};
  msg = error_of([&] { bad.validate(); });
  EXPECT_NE(msg.find("mlp_only_layers names layer 7"), std::string::npos) << msg;
  bad = c;
  bad.num_experts = -1;
  msg = error_of([&] { bad.validate(); });
  EXPECT_NE(msg.find("num_experts must be >= 0"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos);
  EXPECT_NE(error_of([] { nn::parse_load_balance("aux"); }).find("not one of none, aux_loss, bias"), std::string::npos);
}

TEST(MoeModel, PublishedSpecsAreTheHubConfigs) {
  const nn::DecoderConfig a3b = find_spec("30B-A3B").config;
  EXPECT_EQ(a3b.num_layers, 48);
  EXPECT_EQ(a3b.dim, 2048);
  EXPECT_EQ(a3b.num_heads, 32);
  EXPECT_EQ(a3b.num_kv_heads, 4);
  EXPECT_EQ(a3b.num_experts, 128);
  EXPECT_EQ(a3b.num_experts_per_tok, 8);
  EXPECT_EQ(a3b.moe_hidden_dim, 768);
  // Qwen3-30B-A3B: 30.5B parameters, 3.3B active (its model card).
  EXPECT_NEAR(static_cast<double>(a3b.num_params()) / 1e9, 30.5, 0.1);
  EXPECT_NEAR(static_cast<double>(a3b.num_active_params()) / 1e9, 3.3, 0.1);
  const nn::DecoderConfig big = find_spec("235B-A22B").config;
  EXPECT_NEAR(static_cast<double>(big.num_params()) / 1e9, 235.1, 0.5);
  EXPECT_NEAR(static_cast<double>(big.num_active_params()) / 1e9, 22.2, 0.3);
}

}  // namespace
}  // namespace titan::qwen3
