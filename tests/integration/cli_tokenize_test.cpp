// The `titan tokenize` command end to end (the binary): ids and decodes against the HF fixture,
// stdin and --field, and one-line errors naming the line.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "integration/cli_runner.h"
#include "ops/op_harness.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_titan;
using testing::scratch_dir;
using nlohmann::json;

std::vector<json> lines_of(const std::string& text) {
  std::vector<json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

const std::string kTokenizerDir = "../shared/assets/qwen3-tokenizer";

TEST(CliTokenize, EncodesAndDecodesLikeHfTokenizers) {
  std::ifstream fixture(testing::source_path("tests/fixtures/tokenizer/qwen3_cases.jsonl"));
  std::vector<json> cases;
  std::string line;
  while (std::getline(fixture, line)) cases.push_back(json::parse(line));
  ASSERT_GE(cases.size(), 200u);

  const fs::path tmp = scratch_dir("tokenize");
  {
    std::ofstream texts(tmp / "texts.jsonl");
    for (const json& c : cases) texts << json{{"body", c["text"]}, {"n", 1}}.dump() << "\n";
  }
  const std::string tok = testing::source_path(kTokenizerDir);
  // Encode from stdin, with --field.
  const CommandResult enc =
      run_titan("tokenize --tokenizer " + tok + " --field body < " + (tmp / "texts.jsonl").string(), false);
  ASSERT_EQ(enc.exit_code, 0) << enc.output;
  const std::vector<json> got = lines_of(enc.output);
  ASSERT_EQ(got.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(got[i]["ids"], cases[i]["ids"]) << "case " << i;

  // Decode from a file given by --input, with tokenizer.json named directly.
  {
    std::ofstream ids(tmp / "ids.jsonl");
    for (const json& c : cases) ids << json{{"ids", c["ids"]}}.dump() << "\n";
  }
  const CommandResult dec = run_titan("tokenize --decode --tokenizer " + tok + "/tokenizer.json --input " +
                                          (tmp / "ids.jsonl").string(), false);
  ASSERT_EQ(dec.exit_code, 0) << dec.output;
  const std::vector<json> texts = lines_of(dec.output);
  ASSERT_EQ(texts.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_EQ(texts[i]["text"], cases[i]["decoded"]) << "case " << i;
  fs::remove_all(tmp);
}

// A Llama 3 folder: its TemplateProcessing adds <|begin_of_text|>, as HF's encode(text) does
// (ids_special in the fixture); --no-special-tokens gives encode(text, add_special_tokens=False).
TEST(CliTokenize, AddsTheFoldersSpecialTokens) {
  std::ifstream fixture(testing::source_path("tests/fixtures/tokenizer/llama3/cases.jsonl"));
  std::vector<json> cases;
  std::string line;
  while (std::getline(fixture, line)) cases.push_back(json::parse(line));
  ASSERT_GE(cases.size(), 50u);
  const fs::path tmp = scratch_dir("tokenize_special");
  {
    std::ofstream texts(tmp / "texts.jsonl");
    for (const json& c : cases) texts << json{{"text", c["text"]}}.dump() << "\n";
  }
  const std::string tok = testing::source_path("tests/fixtures/tokenizer/llama3");
  for (const bool special : {true, false}) {
    const CommandResult enc = run_titan("tokenize --tokenizer " + tok + "/tokenizer.json --input " +
                                            (tmp / "texts.jsonl").string() + (special ? "" : " --no-special-tokens"),
                                        false);
    ASSERT_EQ(enc.exit_code, 0) << enc.output;
    const std::vector<json> got = lines_of(enc.output);
    ASSERT_EQ(got.size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
      EXPECT_EQ(got[i]["ids"], cases[i][special ? "ids_special" : "ids"]) << "case " << i;
    }
  }
  fs::remove_all(tmp);
}

TEST(CliTokenize, BadInputsAreOneLineErrors) {
  const fs::path tmp = scratch_dir("tokenize_errors");
  const std::string tok = testing::source_path(kTokenizerDir);
  {
    std::ofstream bad(tmp / "bad.jsonl");
    bad << "{\"text\": \"fine\"}\n{\"text\": broken}\n";
    std::ofstream no_field(tmp / "no_field.jsonl");
    no_field << "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"other\": \"c\"}\n";
    std::ofstream bad_id(tmp / "bad_id.jsonl");
    bad_id << "{\"ids\": [1, 2]}\n{\"ids\": [999999999]}\n";
  }
  CommandResult run = run_titan("tokenize --tokenizer " + tok + " --input " + (tmp / "bad.jsonl").string());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("bad.jsonl:2: invalid JSON"), std::string::npos) << run.output;

  run = run_titan("tokenize --tokenizer " + tok + " --input " + (tmp / "no_field.jsonl").string());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("no_field.jsonl:3: expected a \"text\" string field"), std::string::npos) << run.output;

  // An id past the tokenizer's vocabulary (a model's padded rows) is skipped, as HF does, and counted.
  run = run_titan("tokenize --decode --tokenizer " + tok + " --input " + (tmp / "bad_id.jsonl").string());
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("skipped 1 id(s) the tokenizer does not know"), std::string::npos) << run.output;

  run = run_titan("tokenize --tokenizer " + tmp.string() + " --input " + (tmp / "bad.jsonl").string());
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.output.find("tokenizer.json"), std::string::npos) << run.output;

  run = run_titan("tokenize --input x.jsonl");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.output.find("missing required flag --tokenizer"), std::string::npos) << run.output;
  fs::remove_all(tmp);
}

}  // namespace
}  // namespace titan
