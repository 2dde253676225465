// The `titan train-tokenizer` command end to end (the binary): .txt and .jsonl inputs, both --input
// forms, deterministic output files with nothing else left behind, and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
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
using testing::read_text;
using testing::scratch_dir;
using nlohmann::json;

class CliTrainTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() / ("titan_cli_train_tokenizer_" + std::to_string(::getpid()));
    fs::remove_all(tmp_);
    fs::create_directories(tmp_);
    std::ofstream(tmp_ / "a.txt") << "aaaa aaaa\n";
    // JSONL: only the "text" field is trained on, never the JSON around it.
    std::ofstream(tmp_ / "b.jsonl") << "{\"text\": \"bbbbbbbb\", \"id\": 1}\n{\"text\": \"bbbbbbbb\"}\n";
  }
  void TearDown() override { fs::remove_all(tmp_); }
  fs::path tmp_;
};

TEST_F(CliTrainTokenizer, TrainsOnTextAndJsonl) {
  const fs::path out1 = tmp_ / "out1";
  const CommandResult r = run_titan("train-tokenizer --input " + (tmp_ / "a.txt").string() + " " +
                                    (tmp_ / "b.jsonl").string() + " --vocab-size 260 --out " + out1.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json tok = json::parse(read_text(out1 / "tokenizer.json"));
  // (b,b) 14 times; then (a,a) and (bb,bb) 6 times each, "a" < "bb"; then (bb,bb).
  const json merges = tok["model"]["merges"];
  ASSERT_EQ(merges.size(), 3u);
  EXPECT_EQ(merges[0], json::array({"b", "b"}));
  EXPECT_EQ(merges[1], json::array({"a", "a"}));
  EXPECT_EQ(merges[2], json::array({"bb", "bb"}));
  EXPECT_EQ(tok["model"]["vocab"].size(), 259u);
  EXPECT_EQ(tok["added_tokens"][0]["id"], 259);
  const json config = json::parse(read_text(out1 / "tokenizer_config.json"));
  EXPECT_EQ(config["eos_token"], "<|endoftext|>");
  // Only the two files: no tmp file left behind.
  size_t num_files = 0;
  for (const auto& entry : fs::directory_iterator(out1)) num_files += entry.is_regular_file() ? 1 : 0;
  EXPECT_EQ(num_files, 2u);

  // The repeated-flag form, into another folder: the same bytes.
  const fs::path out2 = tmp_ / "out2";
  const CommandResult r2 = run_titan("train-tokenizer --vocab-size=260 --input=" + (tmp_ / "a.txt").string() +
                                     " --out " + out2.string() + " --input " + (tmp_ / "b.jsonl").string());
  ASSERT_EQ(r2.exit_code, 0) << r2.output;
  EXPECT_EQ(read_text(out2 / "tokenizer.json"), read_text(out1 / "tokenizer.json"));
  EXPECT_EQ(read_text(out2 / "tokenizer_config.json"), read_text(out1 / "tokenizer_config.json"));
}

TEST_F(CliTrainTokenizer, OneLineErrors) {
  const std::string a = (tmp_ / "a.txt").string();
  const std::string out = (tmp_ / "out").string();
  const auto expect_error = [](const CommandResult& r, int code, const std::string& what) {
    EXPECT_EQ(r.exit_code, code) << r.output;
    EXPECT_NE(r.output.find(what), std::string::npos) << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  };
  expect_error(run_titan("train-tokenizer --input " + (tmp_ / "missing.txt").string() + " --vocab-size 300 --out " +
                         out),
               1, "missing.txt does not exist");
  expect_error(run_titan("train-tokenizer --input " + a + " --vocab-size 100 --out " + out), 1,
               "vocab size 100 is out of range");
  expect_error(run_titan("train-tokenizer --input " + a + " --vocab-size 99999999999 --out " + out), 1,
               "out of range");
  expect_error(run_titan("train-tokenizer --input " + a + " --vocab-size 300 --out " + a + "/sub"), 1,
               "cannot create the output folder");
  expect_error(run_titan("train-tokenizer --vocab-size 300 --out " + out), 2, "missing --input (text files to train on) or --dataset NAME");
  expect_error(run_titan("train-tokenizer --input " + a + " --dataset quickstart --vocab-size 300 --out " + out), 2,
               "not both");
  expect_error(run_titan("train-tokenizer --dataset nope --vocab-size 300 --out " + out), 1,
               "unknown built-in dataset 'nope'; built in: quickstart");
  EXPECT_FALSE(fs::exists(tmp_ / "out"));  // every error comes before the output folder is made
}

// The corpus built into the binary (titan's own docs and sources) trains without any file.
TEST_F(CliTrainTokenizer, TrainsOnTheBuiltInDataset) {
  const fs::path out = tmp_ / "builtin";
  const CommandResult r = run_titan("train-tokenizer --dataset quickstart --vocab-size 600 --out " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json tok = nlohmann::json::parse(read_text(out / "tokenizer.json"));
  EXPECT_EQ(tok["model"]["vocab"].size() + tok["added_tokens"].size(), 600u) << r.output;
}

}  // namespace
}  // namespace titan
