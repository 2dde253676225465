// The validation loop (validation.*) end to end on one rank: a validation pass leaves the training
// bit for bit as it was (float32, and bfloat16 with activation checkpointing), its loss equals an
// independent `titan forward` of the exported model over the same tokens packed by hand, a resumed
// run validates as an uninterrupted one, and bad settings are one-line errors before step 1.
// Meshes: tests/integration/cli_parallel_test.cpp (CliParallel.Validation*).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "integration/cli_runner.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/data/tokenizer/special_tokens.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::kShakespeare;
using testing::read_jsonl;
using testing::read_text;
using testing::run_titan;
using testing::scratch_dir;

class CliValidation : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = scratch_dir("validation");
    ASSERT_TRUE(fs::exists(kShakespeare)) << kShakespeare;
    const std::string text = read_text(kShakespeare);
    // Training text: all but the last 12,000 characters; the held-out set: 6,000 of those.
    std::ofstream(dir_ / "train.txt", std::ios::binary) << text.substr(0, text.size() - 12000);
    std::ofstream(dir_ / "val.txt", std::ios::binary) << text.substr(text.size() - 6000);
    std::ofstream(dir_ / "tiny.txt", std::ios::binary) << "To be, or not to be";
    const CommandResult r = run_titan("train-tokenizer --input " + (dir_ / "train.txt").string() +
                                      " --vocab-size 512 --out " + (dir_ / "tok").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // A 2-layer debug model, batch 4 x 64, no LR decay (a run's schedule does not depend on
  // training.steps, so a resumed shorter run continues a longer one's).
  static CommandResult train(const std::string& name, const std::string& extra) {
    return run_titan("train --config qwen3_debug --model.n_layers 2 --training.seq_len 64 --training.local_batch_size 4 "
                     "--lr_scheduler.warmup_steps 2 --lr_scheduler.decay_ratio 0 --metrics.log_freq 1 "
                     "--metrics.peak_tflops 1 --training.deterministic --model.hf_assets_path " +
                     (dir_ / "tok").string() + " --training.dataset_path " + (dir_ / "train.txt").string() +
                     " --job.dump_folder " + (dir_ / name).string() + " " + extra);
  }
  static std::string validation(const std::string& extra) {
    return "--validation.enable --validation.dataset_path " + (dir_ / "val.txt").string() + " " + extra;
  }

  // metrics.jsonl rows of one kind: training steps (no "kind") or validation passes.
  static std::vector<nlohmann::json> rows(const std::string& name, bool validation_rows) {
    std::vector<nlohmann::json> out;
    for (const nlohmann::json& row : read_jsonl(dir_ / name / "metrics.jsonl")) {
      if (row.contains("kind") == validation_rows) out.push_back(row);
    }
    return out;
  }

  // Training rows equal bit for bit in loss, grad_norm and lr (JSON keeps doubles exactly).
  static void expect_same_training(const std::vector<nlohmann::json>& a, const std::vector<nlohmann::json>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      for (const char* key : {"step", "loss", "grad_norm", "lr"}) EXPECT_EQ(a[i][key], b[i][key]) << key << " row " << i;
    }
  }

  static fs::path dir_;
};
fs::path CliValidation::dir_;

// Training with validation every 3 steps is the training without it, bit for bit; the pass at the
// last step equals `titan forward` of the exported model over the validation set's whole batches,
// packed here as the loader's contract says ([bos] + tokens + [eot] per document, rows of T + 1).
TEST_F(CliValidation, LeavesTrainingUnchangedAndEqualsAnIndependentForward) {
  CommandResult r = train("off", "--training.steps 6");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = train("on", "--training.steps 6 --checkpoint.last_save_in_hf --metrics.enable_tensorboard " +
                      validation("--validation.freq 3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("validate: step     3  loss:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("time: "), std::string::npos) << r.output;
  expect_same_training(rows("off", false), rows("on", false));
  const std::vector<nlohmann::json> val = rows("on", true);
  ASSERT_EQ(val.size(), 2u);
  EXPECT_EQ(val[0]["kind"], "validation");
  EXPECT_EQ(val[0]["step"], 3);
  EXPECT_EQ(val[1]["step"], 6);
  EXPECT_LT(val[1]["loss"].get<double>(), val[0]["loss"].get<double>());  // the model learned
  EXPECT_NEAR(val[1]["perplexity"].get<double>(), std::exp(val[1]["loss"].get<double>()), 1e-9);

  // The tokens the pass saw, packed independently.
  const fs::path tok = dir_ / "tok";
  const data::Tokenizer tokenizer = data::Tokenizer::from_file(tok.string());
  const data::DocumentTokens doc = data::document_tokens_from_folder(tok.string(), tokenizer);
  std::vector<int32_t> stream;
  stream.insert(stream.end(), doc.prefix.begin(), doc.prefix.end());
  const std::vector<int32_t> ids = tokenizer.encode(read_text(dir_ / "val.txt"));
  stream.insert(stream.end(), ids.begin(), ids.end());
  stream.push_back(doc.eot_id);
  const int64_t T = 64, B = 4;
  const int64_t rows_used = static_cast<int64_t>(stream.size()) / (T + 1) / B * B;
  ASSERT_GE(rows_used, 2 * B) << "the validation set should hold a few batches";
  EXPECT_EQ(val[1]["batches"], rows_used / B);
  EXPECT_EQ(val[1]["targets"], rows_used * T);
  Tensor ids_RT = Tensor::empty({rows_used, T + 1}, DType::i64);
  for (int64_t i = 0; i < rows_used * (T + 1); ++i) ids_RT.data<int64_t>()[i] = stream[static_cast<size_t>(i)];
  const fs::path tokens = dir_ / "val_tokens.safetensors", out = dir_ / "val_out.safetensors";
  ckpt::write_safetensors(tokens.string(), {{"input_ids", ids_RT}, {"labels", ids_RT}});
  r = run_titan("forward --model " + (dir_ / "on" / "checkpoint" / "hf").string() + " --tokens " + tokens.string() +
                " --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double want = ckpt::SafetensorsFile::open(out.string()).get("loss").data<float>()[0];
  const double got = val[1]["loss"].get<double>();
  EXPECT_LT(std::abs(got - want) / want, 1e-5) << got << " vs titan forward " << want;

  // TensorBoard has the two validation scalars (their tags in the event file), loss.svg the series.
  std::string events;
  for (const auto& e : fs::directory_iterator(dir_ / "on" / "tb")) events += read_text(e.path());
  EXPECT_NE(events.find("validation/loss"), std::string::npos);
  EXPECT_NE(events.find("validation/perplexity"), std::string::npos);
  const std::string svg = read_text(dir_ / "on" / "loss.svg");
  EXPECT_NE(svg.find("<polyline class=\"validation\""), std::string::npos);
  EXPECT_NE(svg.find(">validation</text>"), std::string::npos);
}

// bf16 compute with full activation checkpointing: the same bits with and without validation;
// the pass equals `titan forward --mixed-precision bfloat16` (the same bf16 GEMMs, other batch
// shapes: the bar is bf16's).
TEST_F(CliValidation, Bf16WithActivationCheckpointingLeavesTrainingUnchanged) {
  const std::string flags = "--training.steps 4 --training.mixed_precision_param bfloat16 "
                            "--activation_checkpoint.mode full ";
  CommandResult r = train("bf16_off", flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = train("bf16_on", flags + "--checkpoint.last_save_in_hf " + validation("--validation.freq 2 --validation.steps 3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_training(rows("bf16_off", false), rows("bf16_on", false));
  const std::vector<nlohmann::json> val = rows("bf16_on", true);
  ASSERT_EQ(val.size(), 2u);
  EXPECT_EQ(val[1]["batches"], 3);
  EXPECT_EQ(val[1]["targets"], 3 * 4 * 64);

  const fs::path tok = dir_ / "tok";
  const data::Tokenizer tokenizer = data::Tokenizer::from_file(tok.string());
  const data::DocumentTokens doc = data::document_tokens_from_folder(tok.string(), tokenizer);
  std::vector<int32_t> stream;
  stream.insert(stream.end(), doc.prefix.begin(), doc.prefix.end());
  const std::vector<int32_t> ids = tokenizer.encode(read_text(dir_ / "val.txt"));
  stream.insert(stream.end(), ids.begin(), ids.end());
  Tensor ids_RT = Tensor::empty({12, 65}, DType::i64);
  for (int64_t i = 0; i < 12 * 65; ++i) ids_RT.data<int64_t>()[i] = stream[static_cast<size_t>(i)];
  const fs::path tokens = dir_ / "bf16_tokens.safetensors", out = dir_ / "bf16_out.safetensors";
  ckpt::write_safetensors(tokens.string(), {{"input_ids", ids_RT}, {"labels", ids_RT}});
  r = run_titan("forward --mixed-precision bfloat16 --model " + (dir_ / "bf16_on" / "checkpoint" / "hf").string() +
                " --tokens " + tokens.string() + " --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double want = ckpt::SafetensorsFile::open(out.string()).get("loss").data<float>()[0];
  EXPECT_LT(std::abs(val[1]["loss"].get<double>() - want) / want, 1e-3) << val[1]["loss"] << " vs " << want;
}

// A mixture-of-experts model with bias balancing: a pass routes tokens too, and those counts must
// not reach the next step's expert-bias update (nor its expert_load metrics).
TEST_F(CliValidation, MixtureOfExpertsBiasBalancingUnchanged) {
  const std::string flags = "--training.steps 4 --model.name debug_moe --model.load_balance bias ";
  CommandResult r = train("moe_off", flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = train("moe_on", flags + validation("--validation.freq 1 --validation.steps 2"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<nlohmann::json> off = rows("moe_off", false), on = rows("moe_on", false);
  expect_same_training(off, on);
  for (size_t i = 0; i < off.size(); ++i) {
    EXPECT_EQ(off[i]["expert_load_min"], on[i]["expert_load_min"]) << i;
    EXPECT_EQ(off[i]["expert_load_max"], on[i]["expert_load_max"]) << i;
  }
  EXPECT_EQ(rows("moe_on", true).size(), 4u);
}

// Validation has its own loader: a run stopped at step 3 and resumed to 6 trains and validates
// (steps 2, 4, 6) as the uninterrupted run does.
TEST_F(CliValidation, ResumeIsBitIdentical) {
  const std::string flags = "--checkpoint.enable --checkpoint.interval 3 --no-checkpoint.last_save_model_only " +
                            validation("--validation.freq 2 ");
  CommandResult r = train("whole", "--training.steps 6 " + flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = train("split", "--training.steps 3 " + flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = train("split", "--training.steps 6 " + flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_training(rows("whole", false), rows("split", false));
  std::vector<nlohmann::json> whole = rows("whole", true), split = rows("split", true);
  ASSERT_EQ(whole.size(), 3u);
  ASSERT_EQ(split.size(), 4u);  // the first run also validated after its last step (3)
  EXPECT_EQ(split[1]["step"], 3);
  split.erase(split.begin() + 1);
  for (size_t i = 0; i < whole.size(); ++i) {
    EXPECT_EQ(whole[i]["step"], split[i]["step"]);
    EXPECT_EQ(whole[i]["loss"], split[i]["loss"]) << "step " << whole[i]["step"];
  }
}

// Each mistake is one line, before step 1.
TEST_F(CliValidation, BadSettingsAreOneLineErrors) {
  struct Case {
    std::string flags, expect;
    int exit_code;
  };
  const std::string missing = (dir_ / "missing.txt").string();
  const std::vector<Case> cases = {
      {"--validation.enable", "validation.enable is set but validation.dataset_path is empty", 2},
      {validation("--validation.freq 0"), "validation.freq=0 must be >= 1", 2},
      {validation("--validation.steps 0"), "validation.steps=0 must be >= 1 batches, or -1", 2},
      {"--validation.enable --validation.dataset_path " + missing, missing + " does not exist", 1},
      {"--validation.enable --validation.dataset_path " + (dir_ / "tiny.txt").string(),
       "tiny.txt holds ", 1},
  };
  for (const Case& c : cases) {
    const CommandResult r = train("bad", "--training.steps 2 " + c.flags);
    EXPECT_EQ(r.exit_code, c.exit_code) << c.flags << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.flags << "\n" << r.output;
    EXPECT_EQ(r.output.find("step:"), std::string::npos) << "no step may run: " << r.output;
    const size_t error = r.output.find("titan: error: ");
    ASSERT_NE(error, std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin() + static_cast<std::ptrdiff_t>(error), r.output.end(), '\n'), 1) << r.output;
  }
  // The too-small set names its token count and the batch it falls short of.
  const CommandResult r = train("bad", "--training.steps 2 --validation.enable --validation.dataset_path " +
                                           (dir_ / "tiny.txt").string() + " --validation.local_batch_size 2");
  EXPECT_NE(r.output.find("fewer than one validation batch of 2 rows x 65 tokens = 130"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace titan
