// A downloaded model and a Hub dataset through the binary: `titan train --config finetune
// --model.hf_path DIR` on folders laid out as published (Qwen3, Llama, Qwen3.5); a folder of Parquet
// shards trains the loss sequence of the same rows as JSONL and resumes mid-shard to the same
// losses; pretokenized rows (titan tokenize's ids) train the loss sequence of their text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <nlohmann/json.hpp>

#include "integration/cli_runner.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::kShakespeare;
using testing::read_jsonl;
using testing::run_titan;
using testing::scratch_dir;

const fs::path kSource = fs::path(TITAN_SOURCE_DIR);

class CliData : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("OMP_NUM_THREADS", "1", 1);  // tiny runs
    dir_ = scratch_dir("data");
    // A byte-level BPE small enough for the fixtures' vocabularies (301, 310).
    const CommandResult tok = run_titan("train-tokenizer --input " + kShakespeare.string() + " --vocab-size 300 --out " +
                                        (dir_ / "tok").string());
    ASSERT_EQ(tok.exit_code, 0) << tok.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // A model folder as the Hub lays it out: config.json, model.safetensors, tokenizer.json.
  static fs::path published(const std::string& name, const fs::path& fixture) {
    const fs::path out = dir_ / name;
    fs::create_directories(out);
    for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(fixture / f, out / f);
    fs::copy_file(dir_ / "tok" / "tokenizer.json", out / "tokenizer.json");
    return out;
  }

  static std::vector<double> losses(const fs::path& run) {
    std::vector<double> out;
    for (const auto& row : read_jsonl(run / "metrics.jsonl")) out.push_back(row["loss"].get<double>());
    return out;
  }

  // Deterministic small qwen3_debug steps on `data`, into dir_/run.
  static CommandResult train(const std::string& run, const fs::path& data, const std::string& extra) {
    return run_titan("train --config qwen3_debug --model.n_layers 2 --training.seq_len 64 --training.local_batch_size 2 "
                     "--metrics.log_freq 1 --metrics.peak_tflops 1 --lr_scheduler.warmup_steps 2 --job.dump_folder " +
                     (dir_ / run).string() + " --model.hf_assets_path " + (dir_ / "tok").string() +
                     " --training.dataset_path " + data.string() + " " + extra);
  }

  static fs::path dir_;
};
fs::path CliData::dir_;

TEST_F(CliData, FinetuneRunsFromPublishedFolders) {
  // Qwen3.5 as titan exports it (config.json with its layer types, model.safetensors, tokenizer files).
  const CommandResult base = run_titan(
      "train --config qwen3_5_debug --training.steps 1 --training.seq_len 32 --training.local_batch_size 1 "
      "--metrics.peak_tflops 1 --checkpoint.enable --checkpoint.last_save_in_hf --job.dump_folder " +
      (dir_ / "q35").string() + " --model.hf_assets_path " + (dir_ / "tok").string() + " --training.dataset_path " +
      kShakespeare.string());
  ASSERT_EQ(base.exit_code, 0) << base.output;
  const std::vector<std::pair<std::string, fs::path>> folders = {
      {"qwen3", published("qwen3", kSource / "tests/fixtures/hf/untied_gqa2")},
      {"llama", published("llama", kSource / "tests/fixtures/hf/llama_bias")},
      {"qwen3_5", dir_ / "q35" / "checkpoint" / "hf"}};
  for (const auto& [family, folder] : folders) {
    SCOPED_TRACE(family);
    // The README's command; the fixtures' models hold 128-token positions, and a test runs 3 steps.
    const fs::path run = dir_ / ("ft_" + family);
    const CommandResult r = run_titan("train --config finetune --model.hf_path " + folder.string() +
                                      " --training.dataset_path " + kShakespeare.string() + " --job.dump_folder " +
                                      run.string() + " --training.steps 3 --training.seq_len 64 --metrics.log_freq 1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("[data] text rows"), std::string::npos) << r.output;  // auto, from the .txt
    EXPECT_EQ(losses(run).size(), 3u) << r.output;
    // Started from the folder's weights, written back as an HF folder.
    EXPECT_NE(r.output.find(folder.string()), std::string::npos) << r.output;
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"}) {
      EXPECT_TRUE(fs::exists(run / "checkpoint" / "hf" / f)) << f;
    }
    const nlohmann::json a = nlohmann::json::parse(testing::read_text(run / "checkpoint" / "hf" / "config.json"));
    const nlohmann::json b = nlohmann::json::parse(testing::read_text(folder / "config.json"));
    EXPECT_EQ(a["model_type"], b["model_type"]);
    EXPECT_EQ(a["num_hidden_layers"], b["num_hidden_layers"]);
  }
  // The long form wins when both are given: another tokenizer folder than the model's.
  const CommandResult r = run_titan("train --config finetune --model.hf_path " + folders[0].second.string() +
                                    " --model.hf_assets_path " + (dir_ / "missing").string() +
                                    " --training.dataset_path " + kShakespeare.string() + " --job.dump_folder " +
                                    (dir_ / "ft_long").string() + " --training.steps 1 --training.seq_len 64");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find((dir_ / "missing").string()), std::string::npos) << r.output;
}

// lora.dropout: masks drawn from (seed, step, micro-batch, rank, module), so a rerun gives the same
// losses and so does a run stopped at step 4 and resumed; the dropout changes the losses.
TEST_F(CliData, LoraDropoutRerunsAndResumesBitForBit) {
  const fs::path folder = published("qwen3_lora", kSource / "tests/fixtures/hf/untied_gqa2");
  auto run = [&](const std::string& name, const std::string& extra) {
    return run_titan("train --config finetune --model.hf_path " + folder.string() + " --training.dataset_path " +
                     kShakespeare.string() + " --job.dump_folder " + (dir_ / name).string() +
                     " --training.seq_len 64 --training.global_batch_size 4 --metrics.log_freq 1 --lora.rank 4 "
                     "--optimizer.lr 1e-2 --lr_scheduler.warmup_steps 2 --lr_scheduler.decay_ratio 0 "
                     "--checkpoint.interval 4 --no-checkpoint.last_save_model_only " + extra);
  };
  ASSERT_EQ(run("drop_a", "--lora.dropout 0.2 --training.steps 8").exit_code, 0);
  ASSERT_EQ(run("drop_b", "--lora.dropout 0.2 --training.steps 8").exit_code, 0);
  ASSERT_EQ(run("nodrop", "--training.steps 8").exit_code, 0);
  ASSERT_EQ(run("drop_resumed", "--lora.dropout 0.2 --training.steps 4").exit_code, 0);
  const CommandResult resumed = run("drop_resumed", "--lora.dropout 0.2 --training.steps 8");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const std::vector<double> a = losses(dir_ / "drop_a");
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(losses(dir_ / "drop_b"), a);
  EXPECT_EQ(losses(dir_ / "drop_resumed"), a);
  EXPECT_NE(losses(dir_ / "nodrop"), a);
  // The PEFT adapter_config says the dropout it was trained with.
  ASSERT_EQ(run("drop_adapter", "--lora.dropout 0.2 --training.steps 1 --lora.save_adapter adapter").exit_code, 0);
  const nlohmann::json config =
      nlohmann::json::parse(testing::read_text(dir_ / "drop_adapter" / "adapter" / "adapter_config.json"));
  EXPECT_DOUBLE_EQ(config["lora_dropout"].get<double>(), 0.2);
}

// lora.target_parameters: a MoE model's experts adapted (PEFT's target_parameters), trained and
// saved as PEFT names them; a dense model, or another value, is a one-line config error.
TEST_F(CliData, LoraOnMoeExpertsTrainsAndSavesPeftTargetParameters) {
  const std::string experts = "--lora.target_parameters mlp.experts.gate_up_proj,mlp.experts.down_proj ";
  const CommandResult r = train("moe_lora", kShakespeare, "--model.name debug_moe --training.steps 4 --lora.rank 2 "
                                "--lora.target_modules '' --lora.save_adapter adapter " + experts);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("lora_experts: model.layers.1.moe.experts Experts -> LoraExperts"), std::string::npos)
      << r.output;
  const nlohmann::json config =
      nlohmann::json::parse(testing::read_text(dir_ / "moe_lora" / "adapter" / "adapter_config.json"));
  EXPECT_EQ(config["target_parameters"], nlohmann::json({"mlp.experts.down_proj", "mlp.experts.gate_up_proj"}));
  EXPECT_TRUE(config["target_modules"].empty());
  const CommandResult dense = train("dense_lora", kShakespeare, "--training.steps 1 --lora.rank 2 " + experts);
  EXPECT_EQ(dense.exit_code, 2) << dense.output;
  EXPECT_NE(dense.output.find("has no MoE layer"), std::string::npos) << dense.output;
  const CommandResult bad = train("bad_lora", kShakespeare, "--model.name debug_moe --training.steps 1 --lora.rank 2 "
                                  "--lora.target_parameters mlp.experts.down_proj");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("lora.target_parameters='mlp.experts.down_proj' is not what titan adapts"),
            std::string::npos) << bad.output;
}

TEST_F(CliData, ParquetShardsTrainAsJsonlAndResumeMidShard) {
  // Two shards as the Hub names them, and the same rows as two JSONL files.
  const fs::path pq = dir_ / "pq_data", js = dir_ / "js_data";
  fs::create_directories(pq);
  fs::create_directories(js);
  const fs::path fixtures = kSource / "tests/fixtures/parquet";
  fs::copy_file(fixtures / "pyarrow_gzip_v2_plain.parquet", pq / "train-00000-of-00002.parquet");
  fs::copy_file(fixtures / "duckdb_zstd.parquet", pq / "train-00001-of-00002.parquet");
  fs::copy_file(fixtures / "rows.jsonl", js / "train-00000-of-00002.jsonl");
  fs::copy_file(fixtures / "rows.jsonl", js / "train-00001-of-00002.jsonl");
  // No decay: a run stopped at step 5 schedules its lr as the 12-step run does.
  const std::string text = "--training.dataset_format text --training.steps 12 --lr_scheduler.decay_ratio 0 "
                           "--checkpoint.enable --checkpoint.interval 5 --no-checkpoint.last_save_model_only";
  const CommandResult a = train("pq", pq, text);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const CommandResult b = train("js", js, text);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  const std::vector<double> want = losses(dir_ / "js");
  ASSERT_EQ(want.size(), 12u);
  EXPECT_EQ(losses(dir_ / "pq"), want);

  // Stopped at step 5 (mid-way through the first shard's rows, 2 x 65 tokens a step), resumed to 12.
  const CommandResult c = train("pq_resumed", pq, text + " --training.steps 5");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const CommandResult d = train("pq_resumed", pq, text);
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_NE(d.output.find("step 5"), std::string::npos) << d.output;
  EXPECT_EQ(losses(dir_ / "pq_resumed"), want);
}

// titan tokenize on every Parquet fixture (each writer, codec, page version and dictionary setting)
// writes the ids of the same rows' JSONL.
TEST_F(CliData, TokenizeParquetGivesTheIdsOfTheJsonlTwin) {
  const fs::path fixtures = kSource / "tests/fixtures/parquet";
  const std::string tokenize =
      std::string(TITAN_BINARY) + " tokenize --tokenizer " + (dir_ / "tok").string() + " --input ";
  const CommandResult want = testing::run_command(tokenize + (fixtures / "rows.jsonl").string());
  ASSERT_EQ(want.exit_code, 0) << want.output;
  int files = 0;
  for (const auto& e : fs::directory_iterator(fixtures)) {
    if (e.path().extension() != ".parquet") continue;
    const CommandResult got = testing::run_command(tokenize + e.path().string());
    ASSERT_EQ(got.exit_code, 0) << e.path() << got.output;
    EXPECT_EQ(got.output, want.output) << e.path();
    ++files;
  }
  EXPECT_GE(files, 29);
}

TEST_F(CliData, PretokenizedRowsTrainTheLossesOfTheirText) {
  const fs::path rows = kSource / "tests/fixtures/parquet/rows.jsonl";
  const CommandResult ids = testing::run_command(std::string(TITAN_BINARY) + " tokenize --tokenizer " +
                                                 (dir_ / "tok").string() + " --input " + rows.string() + " 2>&1");
  ASSERT_EQ(ids.exit_code, 0) << ids.output;
  // {"ids": [...]} -> {"input_ids": [...]}, as Transformers' datasets name the column.
  std::ofstream out(dir_ / "tokens.jsonl");
  std::istringstream in(ids.output);
  for (std::string line; std::getline(in, line);) {
    out << nlohmann::json{{"input_ids", nlohmann::json::parse(line)["ids"]}}.dump() << "\n";
  }
  out.close();
  const CommandResult a = train("text", rows, "--training.dataset_format text --training.steps 8");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const CommandResult b = train("tokens", dir_ / "tokens.jsonl", "--training.dataset_format auto --training.steps 8");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_NE(b.output.find("pretokenized rows"), std::string::npos) << b.output;
  EXPECT_EQ(losses(dir_ / "tokens"), losses(dir_ / "text"));
}

}  // namespace
}  // namespace titan
