// Document separator / BOS from a tokenizer folder. Expected ids are those the published Qwen3
// tokenizer.json assigns (<|endoftext|> 151643, <|im_start|> 151644, <|im_end|> 151645).
#include "titan/data/tokenizer/special_tokens.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "ops/op_harness.h"

namespace titan::data {
namespace {

namespace fs = std::filesystem;

class SpecialTokens : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = new Tokenizer(Tokenizer::from_file(testing::source_path("../shared/assets/qwen3-tokenizer")));
  }
  static void TearDownTestSuite() { delete tokenizer_; }

  // A folder holding only a tokenizer_config.json with `text` (or none when empty).
  fs::path folder_with_config(const std::string& text) {
    const fs::path dir = fs::temp_directory_path() / ("titan_special_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    if (!text.empty()) std::ofstream(dir / "tokenizer_config.json") << text;
    return dir;
  }
  void TearDown() override { fs::remove_all(fs::temp_directory_path() / ("titan_special_" + std::to_string(::getpid()))); }

  static Tokenizer* tokenizer_;
};
Tokenizer* SpecialTokens::tokenizer_ = nullptr;

using testing::error_of;

TEST_F(SpecialTokens, Qwen3UsesEndOfTextAndNoBos) {
  const DocumentTokens t =
      document_tokens_from_folder(testing::source_path("../shared/assets/qwen3-tokenizer"), *tokenizer_);
  EXPECT_EQ(t.eot_id, 151643);
  EXPECT_TRUE(t.prefix.empty());
  EXPECT_TRUE(t.suffix.empty());
}

TEST_F(SpecialTokens, BosWhenTheConfigAsksForIt) {
  const fs::path dir = folder_with_config(R"({"add_bos_token": true, "bos_token": {"content": "<|im_start|>"}})");
  EXPECT_EQ(document_tokens_from_folder(dir.string(), *tokenizer_).prefix, std::vector<int32_t>{151644});
  folder_with_config(R"({"add_bos_token": false, "bos_token": "<|im_start|>"})");
  EXPECT_TRUE(document_tokens_from_folder(dir.string(), *tokenizer_).prefix.empty());
  folder_with_config("");  // no config at all: eot only
  EXPECT_EQ(document_tokens_from_folder(dir.string(), *tokenizer_).eot_id, 151643);
}

// A Llama 2 folder: tokenizer.json's TemplateProcessing adds <s> (id 1 in the fixture); a
// tokenizer_config.json add_bos_token / add_eos_token overrides that side, as transformers'
// LlamaTokenizerFast rebuilds its template from them.
TEST_F(SpecialTokens, TemplateAndConfigFlags) {
  const fs::path dir = folder_with_config("");
  fs::copy_file(testing::source_path("tests/fixtures/tokenizer/llama2/tokenizer.json"), dir / "tokenizer.json");
  const Tokenizer llama2 = Tokenizer::from_file(dir.string());
  const int32_t bos = llama2.token_id("<s>").value(), eos = llama2.token_id("</s>").value();
  EXPECT_EQ(bos, 1);
  SequenceTokens seq = sequence_tokens_from_folder(dir.string(), llama2);
  EXPECT_EQ(seq.prefix, std::vector<int32_t>{bos});
  EXPECT_TRUE(seq.suffix.empty());
  std::ofstream(dir / "tokenizer_config.json")
      << R"({"add_bos_token": false, "add_eos_token": true, "bos_token": "<s>", "eos_token": "</s>"})";
  seq = sequence_tokens_from_folder(dir.string(), llama2);
  EXPECT_TRUE(seq.prefix.empty());
  EXPECT_EQ(seq.suffix, std::vector<int32_t>{eos});
  // The loader's view: eos_token separates documents, the template's <s> starts each one.
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "</s>"})";
  const DocumentTokens doc = document_tokens_from_folder(dir.string(), llama2);
  EXPECT_EQ(doc.eot_id, eos);
  EXPECT_EQ(doc.prefix, std::vector<int32_t>{bos});
}

TEST_F(SpecialTokens, BadConfigsNameFileAndField) {
  const fs::path dir = folder_with_config(R"({"add_bos_token": true, "bos_token": null})");
  EXPECT_NE(error_of([&] { document_tokens_from_folder(dir.string(), *tokenizer_); })
                .find("tokenizer_config.json: add_bos_token is true but bos_token is null"),
            std::string::npos);
  folder_with_config(R"({"add_bos_token": true, "bos_token": "<|no_such|>"})");
  EXPECT_NE(error_of([&] { document_tokens_from_folder(dir.string(), *tokenizer_); })
                .find("field 'bos_token' names \"<|no_such|>\", which is not in the tokenizer's vocabulary"),
            std::string::npos);
  folder_with_config("{not json");
  EXPECT_NE(error_of([&] { document_tokens_from_folder(dir.string(), *tokenizer_); }).find("invalid JSON"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::data
