// The fine-tuning flow through the binary: train, export an HF folder at the end
// (checkpoint.last_save_in_hf), build a new run's model from that folder's config.json and import
// its weights (checkpoint.initial_load_in_hf), and `titan convert` both ways. Transformers reading
// the export is checked by tools/check_hf_roundtrip.py (not in CI: no Python here).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "integration/cli_runner.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_titan;
using testing::kShakespeare;
using testing::read_jsonl;
using testing::read_text;
using testing::scratch_dir;

class CliHfInterop : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("OMP_NUM_THREADS", "1", 1);  // tiny runs; see cli_checkpoint_test
    dir_ = scratch_dir("hf_interop");
    const CommandResult tok = run_titan("train-tokenizer --input " + kShakespeare.string() +
                                        " --vocab-size 512 --out " + (dir_ / "tok").string());
    ASSERT_EQ(tok.exit_code, 0) << tok.output;
    // A trained model, exported at the end.
    const CommandResult r = run_titan(
        "train --config qwen3_debug --job.dump_folder " + (dir_ / "base").string() + " --model.hf_assets_path " +
        (dir_ / "tok").string() + " --training.dataset_path " + kShakespeare.string() +
        " --metrics.peak_tflops 1 --training.steps 40 --training.local_batch_size 4 --training.seq_len 64"
        " --model.n_layers 2 --lr_scheduler.warmup_steps 5 --metrics.log_freq 1 --checkpoint.enable"
        " --checkpoint.last_save_in_hf");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static fs::path export_dir() { return dir_ / "base" / "checkpoint" / "hf"; }
  static fs::path dir_;
};
fs::path CliHfInterop::dir_;

TEST_F(CliHfInterop, ExportIsACompleteHfFolder) {
  const fs::path hf = export_dir();
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_TRUE(fs::exists(hf / f)) << f;
  }
  const nlohmann::json config = nlohmann::json::parse(read_text(hf / "config.json"));
  EXPECT_EQ(config["architectures"][0], "Qwen3ForCausalLM");
  EXPECT_EQ(config["num_hidden_layers"], 2);
  EXPECT_EQ(config["vocab_size"], 2048);
}

// A run built from the export's config.json (no spec name) that imports its weights starts far
// below a fresh model's loss on the same data, and exactly where a native initial load of the same
// weights (the step-40 checkpoint, model only) starts.
TEST_F(CliHfInterop, ImportContinuesFromTheExportedWeights) {
  const std::string hf = export_dir().string();
  const std::string common = " --training.dataset_path " + kShakespeare.string() +
                             " --metrics.peak_tflops 1 --training.steps 2 --training.local_batch_size 4"
                             " --training.seq_len 64 --metrics.log_freq 1 --lr_scheduler.warmup_steps 1";
  const CommandResult ft = run_titan("train --config qwen3_debug --model.name= --model.hf_assets_path " + hf +
                                     " --checkpoint.initial_load_path " + hf + " --checkpoint.initial_load_in_hf"
                                     " --job.dump_folder " + (dir_ / "ft").string() + common);
  ASSERT_EQ(ft.exit_code, 0) << ft.output;
  EXPECT_NE(ft.output.find("initial load from the HF folder"), std::string::npos) << ft.output;
  EXPECT_NE(ft.output.find("the model of " + hf + "/config.json: "), std::string::npos) << ft.output;  // not "model :"
  const CommandResult fresh = run_titan("train --config qwen3_debug --model.hf_assets_path " + (dir_ / "tok").string() +
                                        " --model.n_layers 2 --job.dump_folder " + (dir_ / "fresh").string() + common);
  ASSERT_EQ(fresh.exit_code, 0) << fresh.output;
  const CommandResult native = run_titan(
      "train --config qwen3_debug --model.hf_assets_path " + (dir_ / "tok").string() + " --model.n_layers 2" +
      " --checkpoint.initial_load_path " + (dir_ / "base" / "checkpoint" / "step-40").string() +
      " --job.dump_folder " + (dir_ / "native").string() + common);
  ASSERT_EQ(native.exit_code, 0) << native.output;
  const std::vector<nlohmann::json> ft_rows = read_jsonl(dir_ / "ft" / "metrics.jsonl");
  const std::vector<nlohmann::json> native_rows = read_jsonl(dir_ / "native" / "metrics.jsonl");
  const double ft_first = ft_rows.front()["loss"].get<double>();
  const double fresh_first = read_jsonl(dir_ / "fresh" / "metrics.jsonl").front()["loss"].get<double>();
  EXPECT_LT(ft_first, fresh_first - 1.0) << "imported " << ft_first << " vs fresh " << fresh_first;
  ASSERT_EQ(ft_rows.size(), native_rows.size());
  for (size_t i = 0; i < ft_rows.size(); ++i) {
    EXPECT_EQ(ft_rows[i]["loss"].get<double>(), native_rows[i]["loss"].get<double>()) << "step " << i + 1;
  }
}

// native -> HF gives the same weights as the export; HF -> native -> HF again; bf16 + shards.
TEST_F(CliHfInterop, ConvertBothWays) {
  const fs::path step = dir_ / "base" / "checkpoint" / "step-40";
  ASSERT_TRUE(fs::exists(step / "manifest.json"));
  CommandResult r = run_titan("convert --from " + step.string() + " --to " + (dir_ / "conv_hf").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_text(dir_ / "conv_hf" / "model.safetensors"), read_text(export_dir() / "model.safetensors"));
  r = run_titan("convert --to-native --from " + (dir_ / "conv_hf").string() + " --to " + (dir_ / "conv_native").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The folder --to-native wrote (holding one step folder) is accepted as --from.
  r = run_titan("convert --from " + (dir_ / "conv_native").string() + " --to " +
                (dir_ / "conv_back").string() + " --tokenizer " + (dir_ / "tok").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(read_text(dir_ / "conv_back" / "model.safetensors"), read_text(export_dir() / "model.safetensors"));
  r = run_titan("convert --from " + step.string() + " --to " + (dir_ / "conv_bf16").string() +
                " --dtype bfloat16 --max-shard-size 1MB");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json index = nlohmann::json::parse(read_text(dir_ / "conv_bf16" / "model.safetensors.index.json"));
  EXPECT_GT(index["weight_map"].size(), 10u);
  int shards = 0;
  for (const auto& e : fs::directory_iterator(dir_ / "conv_bf16")) {
    const std::string name = e.path().filename().string();
    if (name.rfind("model-0000", 0) == 0 && name.find("-of-") != std::string::npos) ++shards;
  }
  EXPECT_GE(shards, 2) << "expected several shards under 1MB";
  EXPECT_FALSE(fs::exists(dir_ / "conv_bf16" / "model.safetensors"));
}

TEST_F(CliHfInterop, ConvertErrors) {
  CommandResult r = run_titan("convert --from " + (dir_ / "nope").string() + " --to " + (dir_ / "x").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("is neither a folder nor a GGUF file"), std::string::npos) << r.output;
  r = run_titan("convert --to-native --from " + (dir_ / "base" / "checkpoint" / "step-40").string() + " --to " +
                (dir_ / "x").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is not a Hugging Face folder"), std::string::npos) << r.output;
  r = run_titan("convert --from " + export_dir().string() + " --to " + (dir_ / "x").string() + " --dtype fp8");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_FALSE(fs::exists(dir_ / "x"));
}

// convert never destroys what it did not write: a folder of the user's files, the source itself, a
// folder inside the source. A previous output of the same direction is replaced; --overwrite forces.
TEST_F(CliHfInterop, ConvertKeepsTheDestinationsFiles) {
  const fs::path step = dir_ / "base" / "checkpoint" / "step-40";
  fs::create_directories(dir_ / "mine");
  { std::ofstream(dir_ / "mine" / "notes.txt") << "my notes"; }
  CommandResult r = run_titan("convert --from " + step.string() + " --to " + (dir_ / "mine").string() + " --to-hf");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is not empty and is not a Hugging Face model folder"), std::string::npos) << r.output;
  EXPECT_EQ(read_text(dir_ / "mine" / "notes.txt"), "my notes");
  r = run_titan("convert --from " + step.string() + " --to " + step.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("is --from itself"), std::string::npos) << r.output;
  r = run_titan("convert --from " + step.string() + " --to " + (step / "hf").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("inside --from"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::exists(step / "manifest.json"));
  EXPECT_FALSE(fs::exists(step / "hf"));
  // An earlier HF output is replaced (the same command twice works).
  for (int i = 0; i < 2; ++i) {
    r = run_titan("convert --from " + step.string() + " --to " + (dir_ / "again").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  r = run_titan("convert --from " + step.string() + " --to " + (dir_ / "mine").string() + " --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "mine" / "config.json"));
}

// Importing into a model of another shape names the tensor and both shapes.
TEST_F(CliHfInterop, ImportIntoTheWrongModelIsAnError) {
  const std::string hf = export_dir().string();
  const CommandResult r = run_titan(
      "train --config qwen3_debug --model.hf_assets_path " + (dir_ / "tok").string() + " --model.n_layers 3" +
      " --checkpoint.initial_load_path " + hf + " --checkpoint.initial_load_in_hf --job.dump_folder " +
      (dir_ / "wrong").string() + " --training.dataset_path " + kShakespeare.string() + " --training.steps 1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("layers.2"), std::string::npos) << r.output;
}

// The registered twin of qwen3_4b_finetune on a tiny HF folder made by tools/make_hf_fixtures.py
// (tests/fixtures/hf/tied_mha) plus a tokenizer: imports, trains, checkpoints, exports the same
// architecture and shapes, and a rerun resumes instead of importing again.
TEST_F(CliHfInterop, FinetuneTwinRunsOnATinyHfFolder) {
  const fs::path assets = dir_ / "tiny-qwen3";
  fs::create_directories(assets);
  const fs::path fixture = fs::path(TITAN_SOURCE_DIR) / "tests/fixtures/hf/tied_mha";
  fs::copy_file(fixture / "config.json", assets / "config.json");
  fs::copy_file(fixture / "model.safetensors", assets / "model.safetensors");
  CommandResult r = run_titan("train-tokenizer --input " + kShakespeare.string() + " --vocab-size 300 --out " +
                              assets.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string args = "train --config qwen3_debug_finetune --model.hf_assets_path " + assets.string() +
                           " --checkpoint.initial_load_path " + assets.string() + " --job.dump_folder " +
                           (dir_ / "twin").string() + " --training.dataset_path " + kShakespeare.string() +
                           " --metrics.peak_tflops 1";
  r = run_titan(args);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("initial load from the HF folder"), std::string::npos) << r.output;
  const nlohmann::json in = nlohmann::json::parse(read_text(fixture / "config.json"));
  const nlohmann::json out = nlohmann::json::parse(read_text(dir_ / "twin" / "checkpoint" / "hf" / "config.json"));
  for (const char* key : {"architectures", "hidden_size", "num_hidden_layers", "num_attention_heads",
                          "num_key_value_heads", "intermediate_size", "vocab_size", "tie_word_embeddings"}) {
    EXPECT_EQ(out[key], in[key]) << key;
  }
  EXPECT_TRUE(fs::exists(dir_ / "twin" / "checkpoint" / "hf" / "tokenizer.json"));
  r = run_titan(args);  // the run's own checkpoint wins over the HF import
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nothing to do"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("initial load from the HF folder"), std::string::npos) << r.output;
}

// A scaled-RoPE folder (tests/fixtures/hf_rope: llama3 in the v4 `rope_scaling` spelling, yarn in
// the v5 `rope_parameters` one) fine-tunes 2 steps and exports a config.json whose RoPE fields are
// the original's, unchanged (Transformers then builds the same RoPE from the export).
TEST_F(CliHfInterop, ScaledRopeFieldsRoundTripThroughFinetuneAndExport) {
  const fs::path fixtures = fs::path(TITAN_SOURCE_DIR) / "tests/fixtures/hf_rope";
  const fs::path tok = dir_ / "tok300";  // the fixtures' vocabulary is 320
  const CommandResult t = run_titan("train-tokenizer --input " + kShakespeare.string() + " --vocab-size 300 --out " +
                                    tok.string());
  ASSERT_EQ(t.exit_code, 0) << t.output;
  for (const char* name : {"llama_llama3", "llama_yarn"}) {
    const fs::path assets = dir_ / (std::string("rope-") + name);
    fs::create_directories(assets);
    fs::copy_file(fixtures / name / "config.json", assets / "config.json");
    fs::copy_file(fixtures / "llama.safetensors", assets / "model.safetensors");
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(tok / file, assets / file);
    const fs::path run = dir_ / (std::string("rope-run-") + name);
    const CommandResult r = run_titan("train --config qwen3_debug_finetune --model.hf_assets_path " + assets.string() +
                                      " --checkpoint.initial_load_path " + assets.string() + " --job.dump_folder " +
                                      run.string() + " --training.dataset_path " + kShakespeare.string() +
                                      " --metrics.peak_tflops 1 --training.steps 2 --training.seq_len 32 "
                                      "--training.local_batch_size 2 --checkpoint.interval 2");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const nlohmann::json in = nlohmann::json::parse(read_text(fixtures / name / "config.json"));
    const nlohmann::json out = nlohmann::json::parse(read_text(run / "checkpoint" / "hf" / "config.json"));
    for (const char* key : {"rope_scaling", "rope_parameters", "rope_theta", "max_position_embeddings"}) {
      if (in.contains(key)) {
        EXPECT_EQ(out[key], in[key]) << name << " " << key << "\n" << out.dump(2);
      }
    }
    // The block is written under the original's key only: a null rope_scaling beside rope_parameters
    // would be the other spelling's.
    EXPECT_EQ(out.contains("rope_scaling"), in.contains("rope_scaling")) << name;
  }
}

}  // namespace
}  // namespace titan
