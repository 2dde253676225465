// Decoder forward and backward against Hugging Face Transformers: dense Qwen3, the Qwen2 / Llama /
// Mistral layouts read from the same config.json path (fixtures/hf, made by
// tools/make_hf_fixtures.py), and Qwen3 mixture-of-experts (fixtures/hf_moe, made by
// tools/make_moe_fixtures.py from Qwen3MoeForCausalLM: aux loss on and off, norm_topk_prob on and
// off, mlp_only_layers, decoder_sparse_step). Float64 references; see the fixtures' README.md.
// Bars (fp32): logits max abs err <= 2e-4, loss abs err <= 1e-5 (the MoE loss includes
// router_aux_loss_coef x aux where the config turns it on), each gradient rel L2 <= 1e-4.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>

#include "models/hf_parity_util.h"
#include "ops/op_harness.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/models/decoder/hf_names.h"
#include "titan/models/decoder/weights.h"

namespace titan::qwen3 {

using namespace titan::models;  // the shared decoder machinery the Qwen3 family is built on
namespace {

using testing::source_path;
using testing::max_abs_diff;
using testing::rel_l2;
using testing::shifted_targets;


class HfParity : public ::testing::TestWithParam<const char*> {};

TEST_P(HfParity, LogitsLossAndEveryGradientMatchTransformers) {
  const std::string dir = source_path(std::string("tests/fixtures/") + GetParam());
  std::unique_ptr<nn::Decoder> model = load_hf_model(dir);
  const auto tokens = ckpt::SafetensorsFile::open(dir + "/tokens.safetensors");
  const auto expected = ckpt::SafetensorsFile::open(dir + "/expected.safetensors");
  const Tensor ids = tokens.get("input_ids").clone();
  const Tensor targets = shifted_targets(tokens.get("labels").clone());

  const Tensor logits = model->forward_logits(ids);
  const Tensor want_logits = expected.get("logits");
  ASSERT_EQ(logits.shape(), want_logits.shape());
  const double logits_err = max_abs_diff(logits, want_logits);
  EXPECT_LE(logits_err, 2e-4) << "logits";

  model->zero_grad();
  const nn::LossResult loss = model->forward_backward(ids, targets);
  const double want_loss = expected.get("loss").data<float>()[0];
  const double loss_err = std::fabs(loss.loss - want_loss);
  EXPECT_LE(loss_err, 1e-5) << "loss " << loss.loss << " want " << want_loss;
  const nn::LossResult loss_only = model->forward_loss(ids, targets);
  EXPECT_LE(std::fabs(loss_only.loss - want_loss), 1e-5) << "forward-only loss";
  if (expected.find("aux_loss") != nullptr) {
    // Stored as 0 where the config has the aux loss off; ours is 0 there too.
    EXPECT_NEAR(loss.sum(nn::kAuxLossTerm), expected.get("aux_loss").data<float>()[0], 1e-5) << "aux loss";
    EXPECT_NEAR(loss_only.sum(nn::kAuxLossTerm), loss.sum(nn::kAuxLossTerm), 1e-12) << "forward-only aux loss";
  }

  size_t num_grads = 0, num_ours = 0;
  for (const ckpt::TensorInfo& info : expected.tensors()) num_grads += info.name.rfind("grad.", 0) == 0;
  double worst_grad = 0.0;
  std::string worst_key;
  for (const nn::Parameter* p : model->parameters()) {
    for (const auto& [name, grad] : to_hf_tensors(p->fqn, p->grad)) {  // one per expert for stacked experts
      ++num_ours;
      const std::string key = "grad." + name;
      ASSERT_NE(expected.find(key), nullptr) << key << " missing from the fixture";
      const Tensor want = expected.get(key);
      ASSERT_EQ(grad.shape(), want.shape()) << key;
      const double err = rel_l2(grad, want);
      EXPECT_LE(err, 1e-4) << key;
      if (err > worst_grad) {
        worst_grad = err;
        worst_key = key;
      }
    }
  }
  EXPECT_EQ(num_ours, num_grads) << "every HF parameter has exactly one of ours";
  // The measured margins, for the log (bars: 2e-4, 1e-5, 1e-4).
  std::printf("[ parity   ] %s: logits max abs err %.2e | loss abs err %.2e | worst gradient rel L2 %.2e (%s)\n",
              GetParam(), logits_err, loss_err, worst_grad, worst_key.c_str());
}

// bf16 mixed precision against Transformers under torch.autocast(bfloat16) (fixtures'
// expected_bf16_autocast.safetensors, tools/make_bf16_fixtures.py). Both round the weights and the
// GEMM operands to bf16 (8 significant bits, a relative step of 2^-8), but at different places:
// autocast also rounds every GEMM output and the attention's inputs, titan keeps GEMM outputs in
// f32. So neither is "the" bf16 answer, and the bar is relative to bf16's own effect on this
// model: titan's distance to Transformers-bf16 is at most the distance between Transformers-bf16
// and Transformers-fp32 (the fixtures' fp32 logits), plus 2e-2 (about 2^-8 of the largest logit
// magnitude, ~2.6, times the few rounding points on a logit's path). The loss gets 1e-2.
TEST_P(HfParity, Bf16LogitsMatchTransformersUnderAutocast) {
  const std::string dir = source_path(std::string("tests/fixtures/") + GetParam());
  std::unique_ptr<nn::Decoder> model = load_hf_model(dir);
  model->set_compute_dtype(DType::bf16);
  const auto tokens = ckpt::SafetensorsFile::open(dir + "/tokens.safetensors");
  const Tensor ids = tokens.get("input_ids").clone();
  const auto bf16 = ckpt::SafetensorsFile::open(dir + "/expected_bf16_autocast.safetensors");
  const auto fp32 = ckpt::SafetensorsFile::open(dir + "/expected.safetensors");
  const Tensor logits = model->forward_logits(ids);
  const Tensor want = bf16.get("logits");
  ASSERT_EQ(logits.shape(), want.shape());
  const double err = max_abs_diff(logits, want), bf16_effect = max_abs_diff(want, fp32.get("logits"));
  const double ours_vs_fp32 = max_abs_diff(logits, fp32.get("logits"));
  EXPECT_LE(err, bf16_effect + 2e-2) << "titan bf16 vs Transformers bf16";
  // The fp32 path is within 2e-4 of the fp32 fixture: bf16 must move the logits well beyond that.
  EXPECT_GT(ours_vs_fp32, 2e-3) << "titan bf16 equals fp32: the model did not compute in bf16";
  const Tensor labels = tokens.get("labels").clone();
  const double loss = model->forward_loss(ids, shifted_targets(labels)).loss;
  const double want_loss = bf16.get("loss").data<float>()[0];
  EXPECT_LE(std::fabs(loss - want_loss), 1e-2) << "loss " << loss << " vs " << want_loss;
  std::printf("[ bf16     ] %s: logits max abs err vs Transformers-bf16 %.2e (Transformers bf16 vs fp32: %.2e; "
              "titan bf16 vs fp32: %.2e) | loss %.6f vs %.6f\n",
              GetParam(), err, bf16_effect, ours_vs_fp32, loss, want_loss);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HfParity,
                         ::testing::Values("hf/tied_mha", "hf/untied_gqa2", "hf/gqa4_headdim", "hf/attn_bias",
                                           "hf/qwen2_bias", "hf/llama_bias", "hf/mistral_headdim",
                                           "hf_moe/e8_top2_norm", "hf_moe/e8_top2_nonorm_aux",
                                           "hf_moe/mlp_only_aux", "hf_moe/sparse_step2_tied"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           for (char& ch : name) ch = std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
                           return name;
                         });

TEST(HfNames, RoundTripEveryParameterOfAModel) {
  nn::DecoderConfig c = load_hf_config(source_path("tests/fixtures/hf/attn_bias"));
  c.tie_embeddings = false;
  nn::Decoder model(c);
  for (const nn::Parameter* p : model.parameters()) {
    EXPECT_EQ(from_hf_name(to_hf_name(p->fqn)), p->fqn);
  }
  EXPECT_EQ(to_hf_name("layers.12.feed_forward.w1.weight"), "model.layers.12.mlp.gate_proj.weight");
  EXPECT_EQ(from_hf_name("model.layers.0.self_attn.rotary_emb.inv_freq"), std::nullopt);
  EXPECT_EQ(to_hf_name("layers.1.feed_forward.w2.bias"), "model.layers.1.mlp.down_proj.bias");
}

// What each architecture builds, read from the fixtures' config.json files.
TEST(HfArchitectures, BiasesNormsAndHeadDimFollowTransformers) {
  const nn::DecoderConfig qwen2 = load_hf_config(source_path("tests/fixtures/hf/qwen2_bias"));
  EXPECT_FALSE(qwen2.qk_norm);
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_FALSE(qwen2.attention_bias);  // Qwen2 has no o_proj bias
  EXPECT_EQ(qwen2.head_dim, 16);       // absent from the file: hidden / heads
  EXPECT_EQ(qwen2.rope_theta, 1e6f);
  const nn::DecoderConfig llama = load_hf_config(source_path("tests/fixtures/hf/llama_bias"));
  EXPECT_FALSE(llama.qk_norm);
  EXPECT_TRUE(llama.attention_bias);
  EXPECT_TRUE(llama.mlp_bias);
  EXPECT_EQ(llama.num_kv_heads, 1);
  const nn::DecoderConfig mistral = load_hf_config(source_path("tests/fixtures/hf/mistral_headdim"));
  EXPECT_FALSE(mistral.qk_norm || mistral.attention_bias || mistral.qkv_bias || mistral.mlp_bias);
  EXPECT_EQ(mistral.head_dim, 16);
  nn::Decoder model(qwen2);
  const auto& attention = dynamic_cast<nn::Attention&>(*model.layers[0]->attention);
  EXPECT_FALSE(dynamic_cast<nn::Linear&>(*attention.wo).bias.defined());
  EXPECT_TRUE(dynamic_cast<nn::Linear&>(*attention.wq).bias.defined());
  int64_t count = 0;
  for (const nn::Parameter* p : model.parameters()) count += p->value.numel();
  EXPECT_EQ(count, qwen2.num_params());
}

}  // namespace
}  // namespace titan::qwen3
