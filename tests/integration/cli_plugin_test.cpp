// Kernel plugins end to end (the binary, as a user runs it): the example rope_tiled plugin replaces
// every layer's RoPE, each replacement is logged, and training gives the same losses as without it;
// rms_norm_one_pass replaces every RMSNorm node and swiglu_kernel adds a kernel to an op, each with
// the same losses; shape constraints fail before step 1; check-kernels checks every module and
// kernel; loading errors (missing file, wrong API version, missing symbol) are one line naming the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "integration/cli_runner.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/plugins/plugin_api.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::kShakespeare;
using testing::read_jsonl;
using testing::run_titan;
using testing::scratch_dir;

class CliPlugin : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("OMP_NUM_THREADS", "1", 1);  // tiny runs; see cli_checkpoint_test
    dir_ = scratch_dir("plugin");
    const CommandResult r = run_titan("train-tokenizer --input " + kShakespeare.string() + " --vocab-size 512 --out " +
                                      (dir_ / "tok").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static CommandResult train(const std::string& name, const std::string& extra) {
    return run_titan("train --config qwen3_debug --job.dump_folder " + (dir_ / name).string() +
                     " --model.hf_assets_path " + (dir_ / "tok").string() + " --training.dataset_path " +
                     kShakespeare.string() + " --metrics.peak_tflops 1 --training.steps 4 --training.local_batch_size 2 "
                     "--model.n_layers 2 --metrics.log_freq 1 --training.deterministic " + extra);
  }

  static fs::path dir_;
};
fs::path CliPlugin::dir_;

const std::string kRopeTiled = TITAN_PLUGIN_DIR "/rope_tiled.so";
const std::string kKernelLib = TITAN_PLUGIN_DIR "/kernel_lib.so";
const std::string kRmsNormOnePass = TITAN_PLUGIN_DIR "/rms_norm_one_pass.so";
const std::string kSwigluKernel = TITAN_PLUGIN_DIR "/swiglu_kernel.so";

// The tensor names of a checkpoint's model file.
std::vector<std::string> tensor_names(const fs::path& file) {
  std::vector<std::string> names;
  const auto st = ckpt::SafetensorsFile::open(file.string());
  for (const ckpt::TensorInfo& info : st.tensors()) names.push_back(info.name);
  std::sort(names.begin(), names.end());
  return names;
}

TEST_F(CliPlugin, RopeTiledReplacesEveryLayersRopeWithTheSameLosses) {
  const CommandResult base = train("base", "");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  const CommandResult tiled = train("tiled", "--override.imports " + kRopeTiled);
  ASSERT_EQ(tiled.exit_code, 0) << tiled.output;
  EXPECT_NE(tiled.output.find("[plugin] loaded " + kRopeTiled + ": 1 override(s) (rope_tiled)"), std::string::npos)
      << tiled.output;
  for (int layer = 0; layer < 2; ++layer) {
    const std::string line = "[Override] rope_tiled: model.layers." + std::to_string(layer) + ".attention.rope Rope -> RopeTiled";
    EXPECT_NE(tiled.output.find(line), std::string::npos) << line << "\n" << tiled.output;
  }
  EXPECT_NE(tiled.output.find("Applied 2 override(s)"), std::string::npos) << tiled.output;
  EXPECT_EQ(base.output.find("[Override]"), std::string::npos) << "overrides are opt-in";
  const std::vector<nlohmann::json> a = read_jsonl(dir_ / "base" / "metrics.jsonl");
  const std::vector<nlohmann::json> b = read_jsonl(dir_ / "tiled" / "metrics.jsonl");
  ASSERT_EQ(a.size(), 4u);
  ASSERT_EQ(b.size(), 4u);
  for (size_t i = 0; i < a.size(); ++i) {
    const double want = a[i]["loss"].get<double>(), got = b[i]["loss"].get<double>();
    EXPECT_LE(std::fabs(got - want), 1e-6 * std::fabs(want)) << "step " << i + 1 << ": " << got << " vs " << want;
  }
}

// kernel_lib's fused SwiGLU (w13 layout) on every dense layer, alone and with rope_tiled: the same
// losses, and checkpoints with the standard feed_forward.w1/w2/w3 names.
TEST_F(CliPlugin, KernelLibFusedSwiGluKeepsLossesAndCheckpointNames) {
  const std::string ckpt = " --checkpoint.enable --checkpoint.interval 4";
  const CommandResult base = train("kl_base", ckpt);
  const CommandResult fused = train("kl_fused", ckpt + " --override.imports " + kKernelLib);
  const CommandResult both = train("kl_both", " --override.imports " + kKernelLib + "," + kRopeTiled);
  ASSERT_EQ(base.exit_code, 0) << base.output;
  ASSERT_EQ(fused.exit_code, 0) << fused.output;
  ASSERT_EQ(both.exit_code, 0) << both.output;
  EXPECT_NE(fused.output.find("[Override] swiglu_w13: model.layers.1.feed_forward FeedForward -> SwiGluW13"),
            std::string::npos)
      << fused.output;
  EXPECT_NE(both.output.find("Applied 4 override(s)"), std::string::npos) << both.output;
  const std::vector<nlohmann::json> a = read_jsonl(dir_ / "kl_base" / "metrics.jsonl");
  for (const char* run : {"kl_fused", "kl_both"}) {
    const std::vector<nlohmann::json> b = read_jsonl(dir_ / run / "metrics.jsonl");
    ASSERT_EQ(b.size(), a.size()) << run;
    for (size_t i = 0; i < a.size(); ++i) {
      const double want = a[i]["loss"].get<double>(), got = b[i]["loss"].get<double>();
      EXPECT_LE(std::fabs(got - want), 1e-6 * std::fabs(want)) << run << " step " << i + 1;
    }
  }
  const fs::path file = fs::path("checkpoint") / "step-4" / "model.safetensors";
  EXPECT_EQ(tensor_names(dir_ / "kl_fused" / file), tensor_names(dir_ / "kl_base" / file));
}

// A node kind only titan built before (RMSNorm: two per block, the q/k norms, the final norm), and
// an op kernel with no override at all: the same losses (another summation order, so 1e-6
// relative), the replacements and the kernel logged.
TEST_F(CliPlugin, AnyNodeKindAndAnOpKernelTrainTheSameLosses) {
  const CommandResult base = train("any_base", "");
  const CommandResult norm = train("any_norm", "--override.imports " + kRmsNormOnePass);
  const CommandResult kernel = train("any_kernel", "--override.imports " + kSwigluKernel);
  ASSERT_EQ(base.exit_code, 0) << base.output;
  ASSERT_EQ(norm.exit_code, 0) << norm.output;
  ASSERT_EQ(kernel.exit_code, 0) << kernel.output;
  for (const char* path : {"model.layers.0.attention_norm", "model.layers.1.attention.q_norm", "model.norm"}) {
    const std::string line = std::string("[Override] rms_norm_one_pass: ") + path + " RmsNorm -> RmsNormOnePass";
    EXPECT_NE(norm.output.find(line), std::string::npos) << line << "\n" << norm.output;
  }
  EXPECT_NE(norm.output.find("Applied 9 override(s)"), std::string::npos) << norm.output;  // 4 per layer + final
  EXPECT_NE(kernel.output.find("[kernel] swiglu: swiglu_plugin_x8"), std::string::npos) << kernel.output;
  const std::vector<nlohmann::json> a = read_jsonl(dir_ / "any_base" / "metrics.jsonl");
  for (const char* run : {"any_norm", "any_kernel"}) {
    const std::vector<nlohmann::json> b = read_jsonl(dir_ / run / "metrics.jsonl");
    ASSERT_EQ(b.size(), a.size()) << run;
    for (size_t i = 0; i < a.size(); ++i) {
      const double want = a[i]["loss"].get<double>(), got = b[i]["loss"].get<double>();
      EXPECT_LE(std::fabs(got - want), 1e-6 * std::fabs(want)) << run << " step " << i + 1;
    }
  }
}

// --module loads a plugin's config functions before --config is resolved; kernel_lib_debug imports
// its own library, so its override applies.
TEST_F(CliPlugin, ModuleRegistersConfigFunctions) {
  const std::string common = " --job.dump_folder " + (dir_ / "module").string() + " --model.hf_assets_path " +
                             (dir_ / "tok").string() + " --training.dataset_path " + kShakespeare.string() +
                             " --training.steps 2 --training.local_batch_size 1 --model.n_layers 1 --metrics.peak_tflops 1";
  const CommandResult r = run_titan("train --module " + kKernelLib + " --config kernel_lib_debug" + common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 config function(s)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[Override] swiglu_w13: model.layers.0.feed_forward FeedForward -> SwiGluW13"),
            std::string::npos)
      << r.output;
  const CommandResult without = run_titan("train --config kernel_lib_debug" + common);
  EXPECT_EQ(without.exit_code, 2) << without.output;
  EXPECT_NE(without.output.find("unknown config function 'kernel_lib_debug'"), std::string::npos) << without.output;
}

// swiglu_w13 takes no biases: a Llama folder with mlp_bias fails at start, naming the reason.
TEST_F(CliPlugin, KernelLibRefusesBiasesBeforeStepOne) {
  const CommandResult r = run_titan("train --config qwen3_debug --model.name= --model.hf_assets_path " TITAN_SOURCE_DIR
                                    "/tests/fixtures/hf/llama_bias --training.seq_len 64 --job.dump_folder " +
                                    (dir_ / "bias").string() + " --override.imports " + kKernelLib);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("titan: error: swiglu_w13 does not support feed-forward biases"), std::string::npos)
      << r.output;
}

// A plugin RoPE sees only theta: on a model with scaled RoPE (a yarn folder, vocabulary widened to
// the suite's 512-token tokenizer) it is refused at build, naming the node and the scaling.
TEST_F(CliPlugin, RopeOverrideRefusesAScaledRope) {
  const fs::path model = dir_ / "yarn";
  fs::create_directories(model);
  nlohmann::json config = nlohmann::json::parse(
      testing::read_text(fs::path(TITAN_SOURCE_DIR) / "tests/fixtures/hf_rope/llama_yarn/config.json"));
  config["vocab_size"] = 512;
  std::ofstream(model / "config.json") << config.dump(2);
  for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(dir_ / "tok" / file, model / file);
  const CommandResult r = run_titan("train --config qwen3_debug --model.name= --model.hf_assets_path " + model.string() +
                                    " --training.seq_len 64 --training.steps 1 --training.local_batch_size 1"
                                    " --job.dump_folder " + (dir_ / "yarn_run").string() + " --override.imports " + kRopeTiled);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("titan: error: [model] model.layers.0.attention.rope: the override's RoPE (RopeTiled) cannot "
                          "apply the model's 'yarn' RoPE scaling"),
            std::string::npos)
      << r.output;
}

TEST_F(CliPlugin, ShapeConstraintFailsBeforeStepOne) {
  const CommandResult r = train("seq300", "--training.seq_len 300 --override.imports " + kRopeTiled);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("titan: error: rope_tiled requires a sequence length that is a multiple of 256, got 300"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("step:"), std::string::npos) << "no step ran";
}

TEST(CliCheckKernels, ComparesEachPluginModuleAndKernelWithTheReference) {
  CommandResult r = run_titan("check-kernels --override.imports " + kRopeTiled + "," + kKernelLib + "," + kRmsNormOnePass +
                              "," + kSwigluKernel);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("module rope_tiled: rope_tiled (plugin) at model.layers.0.attention.rope (Rope -> RopeTiled)"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("skipped [1 x 64]: rope_tiled requires a sequence length that is a multiple of 256"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("(FeedForward -> SwiGluW13)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("dlayers.0.feed_forward.w3.weight"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(RmsNorm -> RmsNormOnePass)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kernel swiglu_plugin_x8 (op swiglu, plugin " + kSwigluKernel +
                          ") in the built-in module at model.layers.0.feed_forward"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("4 module(s) and kernel(s) checked, 0 failed"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("FAIL"), std::string::npos) << r.output;

  r = run_titan("check-kernels --only FeedForward --override.imports " + kRopeTiled + "," + kKernelLib);
  EXPECT_NE(r.output.find("1 module(s) and kernel(s) checked, 0 failed"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("module rope_tiled"), std::string::npos) << r.output;

  // A module and a kernel that compute the wrong thing are caught.
  for (const char* bad : {"/test_wrong_rope.so", "/test_wrong_kernel.so"}) {
    r = run_titan(std::string("check-kernels --override.imports " TITAN_PLUGIN_DIR) + bad);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_NE(r.output.find("FAIL"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("1 module(s) and kernel(s) checked, 1 failed"), std::string::npos) << r.output;
  }

  // The README walk-through's plugin passes too (its constraint skips the 37-token shape).
  r = run_titan("check-kernels --override.imports " TITAN_PLUGIN_DIR "/my_rope.so");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("module my_rope: my_rope at model.layers.0.attention.rope (Rope -> MyRope)"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("1 module(s) and kernel(s) checked, 0 failed"), std::string::npos) << r.output;

  r = run_titan("check-kernels --only Attention");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no plugin modules or kernels to check for Attention"), std::string::npos) << r.output;
}

TEST(CliPluginLoad, LoadingErrorsAreOneLineNamingTheFile) {
  struct Case {
    std::string file, expect;
  };
  const std::vector<Case> cases = {
      {"/nonexistent/kernels.so", "[plugin] /nonexistent/kernels.so does not exist"},
      {TITAN_PLUGIN_DIR "/test_bad_version.so",
       "was built against plugin API version " + std::to_string(TITAN_PLUGIN_API_VERSION + 100) +
           ", this titan has version " + std::to_string(TITAN_PLUGIN_API_VERSION)},
      {TITAN_PLUGIN_DIR "/test_no_register.so", "does not export titan_plugin_register"},
      {TITAN_SOURCE_DIR "/README.md", "cannot load"},
  };
  for (const Case& c : cases) {
    const CommandResult r = run_titan("train --config qwen3_debug --job.dump_folder " +
                                      (fs::temp_directory_path() / "titan_plugin_errors").string() +
                                      " --override.imports " + c.file);
    EXPECT_EQ(r.exit_code, 1) << r.output;
    const size_t error = r.output.find("titan: error: ");
    ASSERT_NE(error, std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.expect, error), std::string::npos) << c.file << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin() + static_cast<std::ptrdiff_t>(error), r.output.end(), '\n'), 1) << r.output;
  }
  fs::remove_all(fs::temp_directory_path() / "titan_plugin_errors");
}

}  // namespace
}  // namespace titan
