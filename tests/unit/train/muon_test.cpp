// Muon against PyTorch (tests/fixtures/muon/, made by tools/make_muon_fixtures.py): the
// Newton–Schulz op against torch.optim.Muon's, and 20 training steps of Transformers' Qwen3 under
// torch.optim.Muon + AdamW; plus the lr adjustment (math), the parameter selection and its
// errors, and a restore that continues bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "models/hf_parity_util.h"
#include "ops/op_harness.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/config/config_error.h"
#include "titan/models/builtin.h"
#include "titan/nn/decoder.h"
#include "titan/ops/newton_schulz/newton_schulz.h"
#include "titan/train/clip.h"
#include "titan/train/job.h"
#include "titan/train/muon.h"

namespace titan::train {
namespace {

using namespace titan::testing;

std::string fixture(const std::string& name) { return source_path("tests/fixtures/muon/" + name); }

bool bf16_exact(const Tensor& t) {
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = t.data<float>()[i];
    if (bf16_to_f32(f32_to_bf16(v)) != v) return false;
  }
  return true;
}

// Every kernel on every case of the torch fixture (wide, tall, square, a batch of 3, 2 steps, one
// row). The algorithm is torch's, bf16 roundings included, but torch sums its products in
// another f32 order, so single roundings of the intermediate products flip by one bf16 ulp (2^-8
// relative) and the flips propagate through the iterations: the bound allows that, and a
// missing rounding, a wrong coefficient or a missed transpose is 10% or more off.
TEST(NewtonSchulz, KernelsMatchTorchMuon) {
  const auto fx = ckpt::SafetensorsFile::open(fixture("newton_schulz.safetensors"));
  int compared = 0;
  for (int k = 0; fx.find(str("g", k)) != nullptr; ++k) {
    const Tensor g = fx.get(str("g", k)).clone(), want = fx.get(str("o", k)).clone();
    ops::NewtonSchulzArgs args;
    args.steps = fx.get(str("steps", k)).clone().data<int64_t>()[0];
    for (const ops::NewtonSchulzImpl& impl : ops::newton_schulz_table().impls()) {
      Tensor out = Tensor::empty(g.shape());
      impl.forward(g, out, args);
      const double rel = relative_difference(out, want);
      std::printf("%s case %d %s: relative difference %.3e\n", impl.name.c_str(), k, shape_str(g.shape()).c_str(), rel);
      EXPECT_LE(rel, 1e-2) << impl.name << " case " << k;
      EXPECT_TRUE(bf16_exact(out)) << impl.name << " case " << k;
      ++compared;
    }
  }
  EXPECT_GE(compared, 12);
}

// torch.optim.Muon's _adjust_lr, by hand: A x B = 64 x 16 and 16 x 64.
TEST(Muon, AdjustedLrIsTorchs) {
  EXPECT_DOUBLE_EQ(muon_adjusted_lr(0.1, MuonLrAdjust::original, 64, 16), 0.1 * 2.0);
  EXPECT_DOUBLE_EQ(muon_adjusted_lr(0.1, MuonLrAdjust::original, 16, 64), 0.1);
  EXPECT_DOUBLE_EQ(muon_adjusted_lr(0.1, MuonLrAdjust::match_rms_adamw, 16, 64), 0.1 * 0.2 * 8.0);
  EXPECT_DOUBLE_EQ(muon_adjusted_lr(0.1, MuonLrAdjust::spectral_unclamped, 16, 64), 0.1 * 0.5);
  EXPECT_EQ(parse_muon_lr_adjust("original"), MuonLrAdjust::original);
  EXPECT_NE(error_of([] { parse_muon_lr_adjust("rms"); }).find("optimizer.muon_adjust_lr='rms'"), std::string::npos);
}

const std::vector<std::pair<std::string, Shape>> kParams = {
    {"tok_embeddings.weight", {128, 32}},           {"layers.0.attention_norm.weight", {32}},
    {"layers.0.attention.wq.weight", {64, 32}},      {"layers.0.attention.wq.bias", {64}},
    {"layers.0.moe.experts.w1", {4, 16, 32}},        {"layers.0.linear_attn.conv1d.weight", {96, 1, 4}},
    {"layers.0.feed_forward.w2.weight", {32, 64}},   {"norm.weight", {32}},
    {"output.weight", {128, 32}}};

std::vector<std::string> names(const std::vector<std::pair<std::string, Shape>>& params) {
  std::vector<std::string> out;
  for (const auto& [name, shape] : params) out.push_back(name);
  return out;
}

TEST(Muon, AutoTakesTheBlocksMatricesAndStackedExperts) {
  EXPECT_EQ(names(muon_matrices("auto", kParams)),
            (std::vector<std::string>{"layers.0.attention.wq.weight", "layers.0.moe.experts.w1",
                                      "layers.0.feed_forward.w2.weight"}));
  EXPECT_EQ(names(muon_matrices("layers.*.feed_forward.*,layers.*.wq.weight", kParams)),
            (std::vector<std::string>{"layers.0.attention.wq.weight", "layers.0.feed_forward.w2.weight"}));
}

TEST(Muon, APatternOnWhatMuonCannotTakeIsAConfigError) {
  const auto message = [](const std::string& spec) {
    try {
      muon_matrices(spec, kParams);
    } catch (const config::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no ConfigError");
  };
  EXPECT_NE(message("layers.*").find("Muon cannot take layers.0.attention_norm.weight [32], a vector (a norm weight "
                                     "or a bias); AdamW updates it"),
            std::string::npos);
  EXPECT_NE(message("tok_embeddings.weight").find("the embedding"), std::string::npos);
  EXPECT_NE(message("output.*").find("the head"), std::string::npos);
  EXPECT_NE(message("layers.*.conv1d.weight").find("not a matrix"), std::string::npos);
  EXPECT_NE(message("layers.*.wk.weight").find("'layers.*.wk.weight' matches no trained parameter"), std::string::npos);
}

struct MuonRun {
  std::unique_ptr<nn::Decoder> model;
  nn::ParameterList params;
  std::unique_ptr<Muon> optimizer;
};

// The fixture's model with Muon as the torch loop configures it: Muon on the 2-D weights of the
// blocks (auto), AdamW on the rest, weight decay 0.1 for both, match_rms_adamw.
MuonRun fixture_run() {
  MuonRun r;
  const std::string dir = fixture("train");
  r.model = models::load_hf_model(models::family_of_hf_folder(dir), dir);
  r.params = r.model->parameters();
  std::vector<ckpt::TensorPiece> places;
  std::vector<std::pair<std::string, Shape>> all;
  for (const nn::Parameter* p : r.params) {
    places.push_back({p->value.shape(), 0});
    all.emplace_back(p->fqn, p->value.shape());
  }
  r.optimizer = std::make_unique<Muon>(r.params, places, std::vector<char>(r.params.size(), 0),
                                       muon_matrices("auto", all), nullptr, MuonConfig{},
                                       AdamWConfig{0.9, 0.95, 1e-8, 0.1});
  return r;
}

double train_step(MuonRun& r, const Tensor& ids, double lr) {
  r.model->zero_grad();
  const nn::LossResult loss = r.model->forward_backward(ids, shifted_targets(ids));
  clip_grad_norm(r.params, 1.0);
  r.optimizer->step(lr);
  return loss.loss;
}

// 20 steps of the trainer's pieces (forward_backward, clip_grad_norm, Muon + AdamW) from
// Transformers' initialisation against torch.optim.Muon + torch.optim.AdamW over Transformers'
// Qwen3 (training.safetensors): every step's loss within 1e-5 relative.
TEST(Muon, TwentyTrainingStepsEqualATorchMuonAndAdamWLoop) {
  MuonRun r = fixture_run();
  size_t muon = 0;
  for (size_t i = 0; i < r.params.size(); ++i) muon += r.optimizer->takes(i);
  EXPECT_EQ(muon, 14u);  // 2 layers x (q, k, v, o, gate, up, down)
  const auto fx = ckpt::SafetensorsFile::open(fixture("training.safetensors"));
  const Tensor batches = fx.get("input_ids").clone(), lrs = fx.get("lr").clone(), losses = fx.get("loss").clone();
  double worst = 0.0;
  for (int64_t step = 0; step < 20; ++step) {
    const double loss = train_step(r, batches.select(step).clone(), lrs.data<float>()[step]);
    const double want = losses.data<float>()[step];
    EXPECT_LE(std::fabs(loss - want), 1e-5 * want) << "step " << step + 1 << " loss " << loss << " torch " << want;
    worst = std::max(worst, std::fabs(loss - want) / want);
  }
  std::printf("20 Muon steps vs torch: loss %.6f -> %.6f, worst relative loss difference %.2e\n",
              losses.data<float>()[0], losses.data<float>()[19], worst);
  EXPECT_LT(losses.data<float>()[19], losses.data<float>()[0] - 0.3f);  // the run learns
}

// Saving the state after 3 steps and restoring it into a fresh optimizer (and model) continues
// bit for bit.
TEST(Muon, RestoredStateContinuesBitForBit) {
  const auto fx = ckpt::SafetensorsFile::open(fixture("training.safetensors"));
  const Tensor batches = fx.get("input_ids").clone();
  MuonRun a = fixture_run();
  for (int64_t step = 0; step < 3; ++step) train_step(a, batches.select(step).clone(), 1e-3);
  MuonRun b = fixture_run();
  std::vector<std::vector<Tensor>> states;
  for (size_t i = 0; i < a.params.size(); ++i) {
    b.params[i]->value.copy_from(a.params[i]->value);
    states.emplace_back();
    const auto state_names = a.optimizer->state_names(a.params[i]->fqn);
    EXPECT_EQ(state_names.size(), a.optimizer->takes(i) ? 1u : 2u) << a.params[i]->fqn;
    for (size_t k = 0; k < state_names.size(); ++k) states.back().push_back(a.optimizer->state(i, k).clone());
  }
  b.optimizer->restore(a.optimizer->step_count(), states);
  const double la = train_step(a, batches.select(3).clone(), 1e-3), lb = train_step(b, batches.select(3).clone(), 1e-3);
  EXPECT_EQ(la, lb);
  for (size_t i = 0; i < a.params.size(); ++i) {
    EXPECT_EQ(max_abs_diff(a.params[i]->value, b.params[i]->value), 0.0) << a.params[i]->fqn;
  }
  states.pop_back();
  EXPECT_NE(error_of([&] { b.optimizer->restore(3, states); }).find("[muon] restore: expected the state of"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::train
