// Qwen3.5 against Hugging Face Transformers (fixtures/hf_qwen3_5, made by
// tools/make_qwen3_5_fixtures.py): a tiny Qwen3_5ForCausalLM folder (3 gated DeltaNet layers and
// one output-gated full-attention layer with partial RoPE, zero-centred norms), 2 x 70 tokens
// (past one delta-rule chunk, not a multiple of it): logits, loss and every gradient; the same
// language model in the multimodal layout (Qwen3_5ForConditionalGeneration, vision tower beside
// it): its logits and gradients. The expected values are Transformers' computed in float64; the bars are
// float32's: logits max abs err <= 2e-4, loss <= 1e-5, each gradient rel L2 <= 1e-4, except the
// decay parameters' (A_log, dt_bias): their gradients sum small per-token terms that cancel, and a
// chunked f32 computation rounds the chunk's cumulative log decay, so they get rel L2 <= 2e-3
// (Transformers' own float32 run is off its float64 by 3.5e-3 and 1.0e-3 on layer 0's; ours by
// 1.0e-3 and 4.1e-4; the fp64 op references, TITAN_USE_REF=1, by < 1e-5).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "models/hf_parity_util.h"
#include "ops/op_harness.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/checkpoint/hf_folder.h"
#include "titan/models/builtin.h"
#include "titan/models/qwen3_5/family.h"
#include "titan/train/clip.h"
#include "titan/train/optimizer.h"

namespace titan::qwen3_5 {
namespace {

namespace fs = std::filesystem;
using testing::source_path;
using testing::max_abs_diff;
using testing::rel_l2;
using testing::shifted_targets;

std::string fixture(const std::string& name) { return source_path("tests/fixtures/hf_qwen3_5/" + name); }


TEST(Qwen3_5HfParity, TextFolderLogitsLossAndEveryGradientMatchTransformers) {
  const std::string dir = fixture("text");
  const models::ModelSpec& spec = models::family_of_hf_folder(dir);
  ASSERT_EQ(spec.name, "qwen3_5");
  std::unique_ptr<nn::Decoder> model = models::load_hf_model(spec, dir);
  EXPECT_EQ(model->config().layer_types.size(), 4u);
  EXPECT_EQ(model->config().rotary_dim(), 4);
  const auto expected = ckpt::SafetensorsFile::open(fixture("expected.safetensors"));
  const Tensor ids = expected.get("input_ids").clone();
  const Tensor targets = shifted_targets(expected.get("labels").clone());

  const Tensor logits = model->forward_logits(ids);
  ASSERT_EQ(logits.shape(), expected.get("logits").shape());
  EXPECT_LE(max_abs_diff(logits, expected.get("logits")), 2e-4) << "logits";

  model->zero_grad();
  const nn::LossResult loss = model->forward_backward(ids, targets);
  const double want_loss = expected.get("loss").data<float>()[0];
  EXPECT_LE(std::fabs(loss.loss - want_loss), 1e-5) << "loss " << loss.loss << " want " << want_loss;
  EXPECT_LE(std::fabs(model->forward_loss(ids, targets).loss - want_loss), 1e-5) << "forward-only loss";

  int compared = 0;
  for (nn::Parameter* p : model->parameters()) {
    for (const auto& [hf, grad] : spec.hf.to_hf_tensors(p->fqn, p->grad)) {
      const ckpt::TensorInfo* info = expected.find("grad." + hf);
      ASSERT_NE(info, nullptr) << "no expected gradient for " << hf;
      const bool decay = hf.ends_with(".A_log") || hf.ends_with(".dt_bias");
      EXPECT_LE(rel_l2(grad.contiguous(), expected.get("grad." + hf)), decay ? 2e-3 : 1e-4)
          << hf << " got " << testing::to_doubles(grad.contiguous())[0] << " want "
          << testing::to_doubles(expected.get("grad." + hf))[0];
      ++compared;
    }
  }
  EXPECT_EQ(compared, 3 + 3 * 14 + 11);  // embedding, head, final norm; 3 DeltaNet layers; 1 attention layer
}

// Qwen3.5 MoE (every MLP 4 experts, top-2 renormalised, plus a sigmoid-gated shared expert; the
// aux loss on): logits, loss with coef x aux, the aux loss, and every gradient (experts per expert).
TEST(Qwen3_5HfParity, MoeFolderLogitsLossAuxLossAndEveryGradientMatchTransformers) {
  const std::string dir = fixture("moe");
  const models::ModelSpec& spec = models::family_of_hf_folder(dir);
  ASSERT_EQ(spec.name, "qwen3_5");
  std::unique_ptr<nn::Decoder> model = models::load_hf_model(spec, dir);
  EXPECT_EQ(model->config().num_moe_layers(), 3);
  EXPECT_EQ(model->config().shared_expert_dim, 24);
  const auto expected = ckpt::SafetensorsFile::open(fixture("expected_moe.safetensors"));
  const Tensor ids = expected.get("input_ids").clone();
  const Tensor targets = shifted_targets(expected.get("labels").clone());
  EXPECT_LE(max_abs_diff(model->forward_logits(ids), expected.get("logits")), 2e-4) << "logits";
  model->zero_grad();
  const nn::LossResult loss = model->forward_backward(ids, targets);
  EXPECT_LE(std::fabs(loss.loss - expected.get("loss").data<float>()[0]), 1e-5) << "loss " << loss.loss;
  EXPECT_NEAR(loss.sum(nn::kAuxLossTerm), expected.get("aux_loss").data<float>()[0], 1e-5) << "aux loss";
  int compared = 0;
  for (nn::Parameter* p : model->parameters()) {
    for (const auto& [hf, grad] : spec.hf.to_hf_tensors(p->fqn, p->grad)) {
      ASSERT_NE(expected.find("grad." + hf), nullptr) << "no expected gradient for " << hf;
      const bool decay = hf.ends_with(".A_log") || hf.ends_with(".dt_bias");
      EXPECT_LE(rel_l2(grad.contiguous(), expected.get("grad." + hf)), decay ? 2e-3 : 1e-4) << hf;
      ++compared;
    }
  }
  // embedding, head, final norm; per layer 2 norms, router, 4 experts x 3, shared expert 3 + gate,
  // and its mixer (DeltaNet 9, attention 6)
  EXPECT_EQ(compared, 3 + 3 * (2 + 1 + 12 + 4) + 2 * 9 + 6);
}

// bf16 mixed precision against Transformers under torch.autocast(bfloat16), with the bar of the
// Qwen3 fixtures (qwen3_hf_parity_test.cpp: titan-bf16 to Transformers-bf16 at most
// Transformers-bf16 to its fp32, plus 2e-2; the loss within 1e-2), for the dense and the MoE folder.
TEST(Qwen3_5HfParity, Bf16LogitsMatchTransformersUnderAutocast) {
  for (const auto& [folder, bf16_file, fp32_file] :
       {std::tuple<const char*, const char*, const char*>{"text", "expected_bf16_autocast.safetensors",
                                                          "expected.safetensors"},
        {"moe", "expected_moe_bf16_autocast.safetensors", "expected_moe.safetensors"}}) {
    SCOPED_TRACE(folder);
    const std::string dir = fixture(folder);
    std::unique_ptr<nn::Decoder> model = models::load_hf_model(models::family_of_hf_folder(dir), dir);
    model->set_compute_dtype(DType::bf16);
    const auto bf16 = ckpt::SafetensorsFile::open(fixture(bf16_file));
    const auto fp32 = ckpt::SafetensorsFile::open(fixture(fp32_file));
    const Tensor ids = fp32.get("input_ids").clone();
    const Tensor logits = model->forward_logits(ids);
    const double err = max_abs_diff(logits, bf16.get("logits"));
    const double bf16_effect = max_abs_diff(bf16.get("logits"), fp32.get("logits"));
    const double ours_vs_fp32 = max_abs_diff(logits, fp32.get("logits"));
    EXPECT_LE(err, bf16_effect + 2e-2) << "titan bf16 vs Transformers bf16";
    EXPECT_GT(ours_vs_fp32, 2e-3) << "titan bf16 equals fp32: the model did not compute in bf16";
    const double loss = model->forward_loss(ids, shifted_targets(fp32.get("labels").clone())).loss;
    EXPECT_LE(std::fabs(loss - bf16.get("loss").data<float>()[0]), 1e-2) << "loss " << loss;
    std::printf("[ bf16     ] qwen3_5 %s: logits max abs err vs Transformers-bf16 %.2e (Transformers bf16 vs fp32 "
                "%.2e; titan bf16 vs fp32 %.2e) | loss %.6f vs %.6f\n",
                folder, err, bf16_effect, ours_vs_fp32, loss, static_cast<double>(bf16.get("loss").data<float>()[0]));
  }
}

TEST(Qwen3_5HfParity, MultimodalFolderIsReadAsItsLanguageModel) {
  const std::string dir = fixture("multimodal");
  const models::ModelSpec& spec = models::family_of_hf_folder(dir);
  ASSERT_EQ(spec.name, "qwen3_5");
  std::unique_ptr<nn::Decoder> model = models::load_hf_model(spec, dir);
  const auto expected = ckpt::SafetensorsFile::open(fixture("expected_multimodal.safetensors"));
  const auto text_expected = ckpt::SafetensorsFile::open(fixture("expected.safetensors"));
  const Tensor ids = text_expected.get("input_ids").clone();
  EXPECT_LE(max_abs_diff(model->forward_logits(ids), expected.get("logits")), 2e-4) << "logits";
  // Its language model is the text folder's: every gradient equals Transformers' of that folder.
  model->zero_grad();
  (void)model->forward_backward(ids, shifted_targets(text_expected.get("labels").clone()));
  int compared = 0;
  for (nn::Parameter* p : model->parameters()) {
    for (const auto& [hf, grad] : spec.hf.to_hf_tensors(p->fqn, p->grad)) {
      const bool decay = hf.ends_with(".A_log") || hf.ends_with(".dt_bias");
      EXPECT_LE(rel_l2(grad.contiguous(), text_expected.get("grad." + hf)), decay ? 2e-3 : 1e-4) << hf;
      ++compared;
    }
  }
  EXPECT_EQ(compared, 3 + 3 * 14 + 11);
  // The MoE model's multimodal folder (Qwen3_5MoeForConditionalGeneration) too.
  const std::string moe_dir = fixture("moe_multimodal");
  std::unique_ptr<nn::Decoder> moe = models::load_hf_model(models::family_of_hf_folder(moe_dir), moe_dir);
  const auto moe_expected = ckpt::SafetensorsFile::open(fixture("expected_moe_multimodal.safetensors"));
  EXPECT_LE(max_abs_diff(moe->forward_logits(ids), moe_expected.get("logits")), 2e-4) << "MoE logits";
}

// The export of a model imported from a multimodal folder is that folder again: config.json of
// Qwen3_5ForConditionalGeneration with the text_config titan writes, the language model under
// model.language_model.*, and the vision tower's tensors byte for byte as the source stores them
// (tools/check_qwen3_5_export.py loads such an export strictly in Transformers). The export reads
// back to the same logits.
TEST(Qwen3_5HfParity, MultimodalExportKeepsTheVisionTowerAndReadsBack) {
  const std::string dir = fixture("multimodal");
  const models::ModelSpec& spec = models::family_of_hf_folder(dir);
  std::unique_ptr<nn::Decoder> model = models::load_hf_model(spec, dir);
  const fs::path tmp = fs::temp_directory_path() / ("titan_qwen3_5_export_" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  const fs::path out = tmp / "hf";
  models::HfExportOptions options;
  options.source_dir = dir;
  options.architecture = spec.hf.architecture_of(dir);
  EXPECT_EQ(options.architecture, "Qwen3_5ForConditionalGeneration");
  spec.hf.save_folder(*model, out.string(), options);
  nlohmann::json config;
  std::ifstream(out / "config.json") >> config;
  EXPECT_EQ(config["architectures"], nlohmann::json{"Qwen3_5ForConditionalGeneration"});
  EXPECT_TRUE(config.contains("vision_config"));
  EXPECT_EQ(config["text_config"]["layer_types"].size(), 4u);
  const ckpt::HfWeights source = ckpt::HfWeights::open(dir), exported = ckpt::HfWeights::open(out.string());
  int vision = 0;
  for (const std::string& name : source.names()) {
    ASSERT_NE(exported.find(name), nullptr) << name;
    if (!name.starts_with("model.visual.")) continue;
    const Tensor a = source.get(name), b = exported.get(name);
    EXPECT_TRUE(a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0)
        << name;
    ++vision;
  }
  EXPECT_GT(vision, 0);
  EXPECT_EQ(exported.names().size(), source.names().size());
  const Tensor ids = ckpt::SafetensorsFile::open(fixture("expected.safetensors")).get("input_ids").clone();
  std::unique_ptr<nn::Decoder> back = models::load_hf_model(spec, out.string());
  EXPECT_EQ(max_abs_diff(back->forward_logits(ids), model->forward_logits(ids)), 0.0);
  fs::remove_all(tmp);
}

// 20 steps of the trainer's pieces (forward_backward, clip_grad_norm, AdamW) from the train
// folder's weights (Transformers' own init) against a torch loop over Transformers' model in
// float64 (training.safetensors): every step's loss and gradient norm within 1e-5 relative.
TEST(Qwen3_5HfParity, TwentyTrainingStepsEqualATorchAdamWLoop) {
  const std::string dir = fixture("train");
  std::unique_ptr<nn::Decoder> model = models::load_hf_model(models::family_of_hf_folder(dir), dir);
  const auto fx = ckpt::SafetensorsFile::open(fixture("training.safetensors"));
  const Tensor batches = fx.get("input_ids").clone(), lrs = fx.get("lr").clone();
  const Tensor losses = fx.get("loss").clone(), norms = fx.get("grad_norm").clone();
  const nn::ParameterList params = model->parameters();
  train::AdamW optimizer(params, {0.9, 0.95, 1e-8, 0.1});
  double worst_loss = 0.0, worst_norm = 0.0;
  for (int64_t step = 0; step < 20; ++step) {
    const Tensor ids = batches.select(step).clone();
    model->zero_grad();
    const nn::LossResult loss = model->forward_backward(ids, shifted_targets(ids));
    const double norm = train::clip_grad_norm(params, 1.0);
    optimizer.step(lrs.data<float>()[step]);
    const double want_loss = losses.data<float>()[step], want_norm = norms.data<float>()[step];
    EXPECT_LE(std::fabs(loss.loss - want_loss), 1e-5 * want_loss) << "step " << step + 1 << " loss " << loss.loss;
    EXPECT_LE(std::fabs(norm - want_norm), 1e-5 * want_norm) << "step " << step + 1 << " grad norm " << norm;
    worst_loss = std::max(worst_loss, std::fabs(loss.loss - want_loss) / want_loss);
    worst_norm = std::max(worst_norm, std::fabs(norm - want_norm) / want_norm);
    if (step == 19) std::printf("step 1 loss %.6f, step 20 loss %.6f\n", losses.data<float>()[0], loss.loss);
  }
  std::printf("20 steps vs torch: worst relative loss diff %.2e, grad norm %.2e\n", worst_loss, worst_norm);
}

}  // namespace
}  // namespace titan::qwen3_5
