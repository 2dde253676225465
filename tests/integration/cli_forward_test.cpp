// The `titan forward` command end to end (the binary, as a user runs it), against the Hugging
// Face fixture, and its one-line errors with a non-zero exit code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "integration/cli_runner.h"
#include "ops/op_harness.h"
#include "titan/checkpoint/safetensors.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_titan;
using testing::scratch_dir;

class CliForwardParity : public ::testing::TestWithParam<const char*> {};

// Dense, and a mixture of experts with the aux loss in its loss (per-expert gradient names).
TEST_P(CliForwardParity, WritesLogitsLossAndGradsMatchingTransformers) {
  const std::string dir = testing::source_path(std::string("tests/fixtures/") + GetParam());
  const fs::path tmp = scratch_dir("forward");
  const fs::path out = tmp / "out.safetensors";
  const CommandResult run = run_titan("forward --model " + dir + " --tokens " + dir + "/tokens.safetensors --out " +
                            out.string() + " --grads");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto got = ckpt::SafetensorsFile::open(out.string());
  const auto want = ckpt::SafetensorsFile::open(dir + "/expected.safetensors");
  EXPECT_EQ(got.get("loss").shape(), Shape{});
  EXPECT_NEAR(got.get("loss").data<float>()[0], want.get("loss").data<float>()[0], 1e-5);
  if (want.find("aux_loss") != nullptr) {
    ASSERT_NE(got.find("aux_loss"), nullptr);
    EXPECT_NEAR(got.get("aux_loss").data<float>()[0], want.get("aux_loss").data<float>()[0], 1e-5);
  }
  EXPECT_TRUE(testing::all_close("logits", got.get("logits"), want.get("logits"), {2e-4, 0.0}));
  for (const ckpt::TensorInfo& info : want.tensors()) {
    if (info.name.rfind("grad.", 0) != 0) continue;
    ASSERT_NE(got.find(info.name), nullptr) << info.name;
    EXPECT_TRUE(testing::all_close(info.name, got.get(info.name), want.get(info.name), {1e-5, 1e-3}));
  }
  // Everything the fixture has but the cross-entropy alone (the MoE fixtures' ce_loss).
  EXPECT_EQ(got.tensors().size(), want.tensors().size() - (want.find("ce_loss") != nullptr));
  fs::remove_all(tmp);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CliForwardParity,
                         ::testing::Values("hf/untied_gqa2", "hf_moe/e8_top2_nonorm_aux"));

// RoPE scaling (tests/fixtures/hf_rope, tools/make_rope_fixtures.py): a case folder is its
// config.json plus its architecture's shared weights; 64 tokens pass the original context (32), so
// each type's scaling (and dynamic's / longrope's dependence on the length) is active. Transformers'
// logits[..., :24] and logsumexp over the whole vocabulary, within 2e-4.
class CliForwardRope : public ::testing::TestWithParam<const char*> {};

TEST_P(CliForwardRope, LogitsMatchTransformers) {
  const fs::path fixtures = testing::source_path("tests/fixtures/hf_rope");
  const std::string name = GetParam();
  const fs::path tmp = scratch_dir(std::string("rope_") + name);
  const fs::path model = tmp / name;
  fs::create_directories(model);
  fs::copy_file(fixtures / name / "config.json", model / "config.json");
  fs::copy_file(fixtures / (name.substr(0, name.find('_')) + ".safetensors"), model / "model.safetensors");
  const fs::path out = tmp / "out.safetensors";
  const CommandResult run = run_titan("forward --model " + model.string() + " --tokens " +
                                      (fixtures / "tokens.safetensors").string() + " --out " + out.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto got = ckpt::SafetensorsFile::open(out.string());
  const auto want = ckpt::SafetensorsFile::open((fixtures / name / "expected.safetensors").string());
  const Tensor logits = got.get("logits");  // [1, T, V]
  const Tensor want_slice = want.get("logits_slice"), want_lse = want.get("logsumexp");
  const int64_t t = logits.size(1), v = logits.size(2), w = want_slice.size(2);
  ASSERT_EQ(want_slice.size(1), t);
  Tensor slice = Tensor::empty({1, t, w}), lse = Tensor::empty({1, t});
  for (int64_t i = 0; i < t; ++i) {
    const float* row = logits.data<float>() + i * v;
    double mx = row[0], sum = 0.0;
    for (int64_t j = 0; j < v; ++j) mx = std::max(mx, static_cast<double>(row[j]));
    for (int64_t j = 0; j < v; ++j) sum += std::exp(row[j] - mx);
    lse.data<float>()[i] = static_cast<float>(mx + std::log(sum));
    for (int64_t j = 0; j < w; ++j) slice.data<float>()[i * w + j] = row[j];
  }
  EXPECT_TRUE(testing::all_close(name + " logits[..., :24]", slice, want_slice, {2e-4, 0.0}));
  EXPECT_TRUE(testing::all_close(name + " logsumexp", lse, want_lse, {2e-4, 0.0}));
  fs::remove_all(tmp);
}

INSTANTIATE_TEST_SUITE_P(Types, CliForwardRope,
                         ::testing::Values("llama_linear", "llama_dynamic", "llama_yarn", "llama_llama3", "llama_llama3_fractional",
                                           "llama_longrope",
                                           "qwen3_yarn"));

// Loss semantics as Transformers' causal LM: without labels the loss is model(input_ids,
// labels=input_ids)'s; with every label -100 it is the mean over no targets, nan (not 0).
TEST(CliForward, LossWithoutLabelsAndWithNoTargets) {
  const std::string dir = testing::source_path("tests/fixtures/hf/untied_gqa2");
  const fs::path tmp = scratch_dir("loss_semantics");
  const ckpt::SafetensorsFile tokens = ckpt::SafetensorsFile::open(dir + "/tokens.safetensors");
  const Tensor ids = tokens.get("input_ids").clone();
  Tensor ignored = Tensor::empty(ids.shape(), DType::i64);
  for (int64_t i = 0; i < ignored.numel(); ++i) ignored.data<int64_t>()[i] = -100;
  ckpt::write_safetensors((tmp / "ids.safetensors").string(), {{"input_ids", ids}});
  ckpt::write_safetensors((tmp / "same.safetensors").string(), {{"input_ids", ids}, {"labels", ids}});
  ckpt::write_safetensors((tmp / "none.safetensors").string(), {{"input_ids", ids}, {"labels", ignored}});
  float loss[3];
  int k = 0;
  for (const char* name : {"ids", "same", "none"}) {
    const std::string out = (tmp / (std::string(name) + "_out.safetensors")).string();
    const CommandResult run = run_titan("forward --model " + dir + " --tokens " + (tmp / (std::string(name) + ".safetensors")).string() +
                                        " --out " + out);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    loss[k++] = ckpt::SafetensorsFile::open(out).get("loss").data<float>()[0];
  }
  EXPECT_EQ(loss[0], loss[1]);
  EXPECT_TRUE(std::isnan(loss[2])) << loss[2];
  fs::remove_all(tmp);
}

TEST(CliForward, BadInputsAreOneLineErrors) {
  const std::string dir = testing::source_path("tests/fixtures/hf/untied_gqa2");
  const fs::path tmp = scratch_dir("errors");
  CommandResult run = run_titan("forward --model " + tmp.string() + " --tokens " + dir + "/tokens.safetensors --out " +
                      (tmp / "o.safetensors").string());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("config.json"), std::string::npos) << run.output;

  run = run_titan("forward --model " + dir + " --tokens " + (tmp / "nope.safetensors").string() + " --out x");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("nope.safetensors"), std::string::npos) << run.output;

  run = run_titan("forward --model " + dir + " --tokens " + dir + "/tokens.safetensors");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("missing required flag --out"), std::string::npos) << run.output;

  run = run_titan("forward --modle x");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("unknown flag '--modle'"), std::string::npos) << run.output;

  // An existing output file survives a failed run untouched; one titan did not write is refused
  // before any work (titan replaces only its own outputs).
  const fs::path keep = tmp / "keep.safetensors";
  std::ofstream(keep) << "precious";
  run = run_titan("forward --model " + tmp.string() + " --tokens " + dir + "/tokens.safetensors --out " + keep.string());
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("is a file titan did not write"), std::string::npos) << run.output;
  std::ifstream in(keep);
  std::string content((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(content, "precious");
  fs::remove_all(tmp);
}

// A config.json of 1e9 layers, or a PEFT adapter of rank 1e8, needs terabytes: forward and
// generate refuse it (exit 2, the error the last line, naming the field to lower) before building
// anything, instead of growing until the OOM killer ends them.
TEST(CliForward, SizesNoMachineHoldsAreRefusedBeforeLoading) {
  const std::string dir = testing::source_path("tests/fixtures/hf/untied_gqa2");
  const fs::path tmp = scratch_dir("huge");
  {
    std::ifstream in(dir + "/config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    config["num_hidden_layers"] = 1000000000;
    fs::create_directories(tmp / "deep");
    std::ofstream(tmp / "deep" / "config.json") << config.dump(2);
    fs::copy_file(dir + "/model.safetensors", tmp / "deep" / "model.safetensors");
  }
  fs::copy(testing::source_path("tests/fixtures/lora/dense_all_linear/adapter"), tmp / "wide");
  {
    std::ifstream in(tmp / "wide" / "adapter_config.json");
    nlohmann::json adapter = nlohmann::json::parse(in);
    adapter["r"] = 100000000;
    in.close();
    std::ofstream(tmp / "wide" / "adapter_config.json") << adapter.dump(2);
  }
  const std::string tokens = " --tokens " + dir + "/tokens.safetensors --out " + (tmp / "o.safetensors").string();
  const std::string deep = (tmp / "deep").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"forward --model " + deep + tokens, "HINT: lower num_hidden_layers in " + deep + "/config.json"},
      {"generate --max-new-tokens 1 --model " + deep + tokens, "HINT: lower num_hidden_layers in " + deep + "/config.json"},
      {"generate --max-new-tokens 1 --model " + dir + " --adapter " + (tmp / "wide").string() + tokens,
       "HINT: lower r in " + (tmp / "wide").string() + "/adapter_config.json"},
  };
  for (const auto& [args, hint] : cases) {
    const CommandResult r = run_titan(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    const size_t error = r.output.find("titan: error: [memory] ");
    ASSERT_NE(error, std::string::npos) << args << "\n" << r.output;
    EXPECT_NE(r.output.find(hint, error), std::string::npos) << args << "\n" << r.output;
    EXPECT_EQ(r.output.find('\n', error), r.output.size() - 1) << "the error is the last line\n" << r.output;
  }
  EXPECT_FALSE(fs::exists(tmp / "o.safetensors"));
  fs::remove_all(tmp);
}

TEST(CliDemo, RunsAndPrintsMetrics) {
  const CommandResult run = run_titan("demo --steps 1 --batch 1 --seq 32");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  for (const char* what : {"cpu path", "GEMM oneDNN", "kernels:", "loss", "grad_norm", "tokens/s"}) {
    EXPECT_NE(run.output.find(what), std::string::npos) << what << " missing in:\n" << run.output;
  }
}

// Qwen3.5 through the binary: the multimodal folder as published (text_config, model.language_model.*,
// the vision tower beside it) runs as its language model with Transformers' logits; folders with a
// layer kind titan does not know, heads that do not divide, a layer_types list of the wrong length
// and a multimodal config.json without its text_config are each a one-line error, exit 2, before
// the model is built.
TEST(CliQwen3_5, MultimodalFolderRunsAndBadFoldersAreOneLineErrors) {
  const std::string fixtures = testing::source_path("tests/fixtures/hf_qwen3_5");
  const fs::path tmp = scratch_dir("qwen3_5");
  const fs::path out = tmp / "out.safetensors";
  const CommandResult run = run_titan("forward --model " + fixtures + "/multimodal --tokens " + fixtures +
                                      "/expected.safetensors --out " + out.string());
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto want = ckpt::SafetensorsFile::open(fixtures + "/expected_multimodal.safetensors");
  EXPECT_TRUE(testing::all_close("logits", ckpt::SafetensorsFile::open(out.string()).get("logits"), want.get("logits"),
                                 {2e-4, 0.0}));

  // --grads: every gradient under the folder's own names (issue 49: the multimodal folder's were
  // written as model.* and so missing), one per tensor of its language model, as the MoE folder's
  // per-expert names and the text folder's.
  for (const char* folder : {"multimodal", "moe_multimodal", "moe", "text"}) {
    const CommandResult g = run_titan("forward --grads --model " + fixtures + "/" + folder + " --tokens " + fixtures +
                                      "/expected.safetensors --out " + out.string());
    ASSERT_EQ(g.exit_code, 0) << folder << "\n" << g.output;
    std::set<std::string> grads, weights;
    const auto written = ckpt::SafetensorsFile::open(out.string());
    const auto folder_weights = ckpt::SafetensorsFile::open(fixtures + "/" + folder + "/model.safetensors");
    for (const ckpt::TensorInfo& t : written.tensors()) {
      if (t.name.starts_with("grad.")) grads.insert(t.name.substr(5));
    }
    for (const ckpt::TensorInfo& t : folder_weights.tensors()) {
      if (!t.name.starts_with("model.visual.") && !t.name.starts_with("mtp.")) weights.insert(t.name);
    }
    EXPECT_EQ(grads, weights) << folder;
  }

  using Edit = void (*)(nlohmann::json&);
  const std::tuple<const char*, const char*, Edit, const char*> cases[] = {
      {"kind", "text", [](nlohmann::json& j) { j["layer_types"][1] = "sliding_attention"; },
       "field 'layer_types' contains \"sliding_attention\", a layer kind titan does not know"},
      {"heads", "text", [](nlohmann::json& j) { j["linear_num_value_heads"] = 3; },
       "linear_num_value_heads (3) must be a multiple of linear_num_key_heads (2)"},
      {"length", "text", [](nlohmann::json& j) { j["layer_types"].erase(3); },
       "layer_types lists 3 layers but the model has 4"},
      {"no_text", "multimodal", [](nlohmann::json& j) { j.erase("text_config"); },
       "field 'text_config' (the language model of a Qwen3_5ForConditionalGeneration folder) is missing"},
  };
  for (const auto& [name, source, edit, message] : cases) {
    const fs::path dir = tmp / name;
    fs::copy(fs::path(fixtures) / source, dir, fs::copy_options::recursive);
    nlohmann::json config;
    std::ifstream(dir / "config.json") >> config;
    edit(config);
    std::ofstream(dir / "config.json") << config.dump(2);
    const CommandResult r = run_titan("train --config qwen3_debug --model.name \"\" --model.hf_assets_path " + dir.string() +
                                      " --training.steps 1 --job.dump_folder " + (tmp / "run").string());
    EXPECT_EQ(r.exit_code, 2) << name << "\n" << r.output;
    EXPECT_NE(r.output.find(message), std::string::npos) << name << "\n" << r.output;
    EXPECT_EQ(r.output.find("error"), r.output.rfind("error")) << name << ": one line\n" << r.output;
  }
  fs::remove_all(tmp);
}

}  // namespace
// QLoRA inference: `titan forward --adapter --base-quantization nf4|int8` quantizes the base's
// linear weights while loading (bitsandbytes' formats) and computes with them decoded; the logits
// equal Transformers + PEFT on the base decoded by bitsandbytes (dequantize-then-matmul,
// tools/make_qlora_fixtures.py) within f32 noise, and differ from the unquantized base's.
TEST(CliForward, QuantizedBaseWithAnAdapterEqualsDequantizeThenMatmul) {
  const fs::path tmp = scratch_dir("forward_qlora");
  const std::string base = testing::source_path("tests/fixtures/hf/untied_gqa2");
  const std::string lora = testing::source_path("tests/fixtures/lora/dense_all_linear");
  double worst_other = 0.0;
  for (const std::string kind : {"nf4", "int8"}) {
    const std::string expected = lora + "/expected_" + kind + ".safetensors";
    const CommandResult r = run_titan("forward --model " + base + " --adapter " + lora + "/adapter --base-quantization " +
                                      kind + " --tokens " + expected + " --out " + (tmp / (kind + ".safetensors")).string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const Tensor got = ckpt::SafetensorsFile::open((tmp / (kind + ".safetensors")).string()).get("logits").clone();
    const Tensor want = ckpt::SafetensorsFile::open(expected).get("logits").clone();
    ASSERT_EQ(got.shape(), want.shape());
    double worst = 0.0, scale = 0.0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      worst = std::max(worst, std::fabs(double(got.data<float>()[i]) - want.data<float>()[i]));
      scale = std::max(scale, std::fabs(double(want.data<float>()[i])));
    }
    std::printf("%s base: max |logit difference| %.3g (max |logit| %.3g)\n", kind.c_str(), worst, scale);
    EXPECT_LE(worst, 1e-5 * scale) << kind;
    const Tensor plain = ckpt::SafetensorsFile::open(lora + "/expected.safetensors").get("logits").clone();
    for (int64_t i = 0; i < want.numel(); ++i) {
      worst_other = std::max(worst_other, std::fabs(double(plain.data<float>()[i]) - want.data<float>()[i]));
    }
  }
  EXPECT_GT(worst_other, 1e-2) << "the quantized bases must change the logits (the test would not see a lost quantization)";
  const std::string tokens = " --tokens " + lora + "/expected_nf4.safetensors --out " + (tmp / "x.safetensors").string();
  for (const auto& [flags, expect] : std::vector<std::pair<std::string, std::string>>{
           {" --base-quantization nf4", "--base-quantization needs --adapter"},
           {" --adapter " + lora + "/adapter --base-quantization fp4", "--base-quantization fp4 is not none, nf4, int8 or gguf"},
           {" --adapter " + lora + "/adapter --base-quantization nf4 --grads", "a quantized base is frozen and has no gradients"}}) {
    const CommandResult r = run_titan("forward --model " + base + flags + tokens);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    EXPECT_NE(r.output.find(expect), std::string::npos) << flags << "\n" << r.output;
  }
  fs::remove_all(tmp);
}

}  // namespace titan
