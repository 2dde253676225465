// Row layouts: ShareGPT, Alpaca, renamed-key OpenAI and custom chat rows (JSONL and Parquet) map
// to the messages Transformers renders in tests/fixtures/chat/layouts (tools/
// make_chat_layout_fixtures.py: LLaMA-Factory's mapping, apply_chat_template's text and ids) and
// pack into the batches the equivalent messages JSONL gives; pretokenized rows pack into the
// batches of the text they were tokenized from, labels' -100 masking the loss; "auto" picks the
// layout from the first row; rows of no layout are one line naming their fields.
#include "titan/data/row_format.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "titan/core/error.h"
#include "titan/data/chat_template.h"
#include "titan/data/dataset.h"
#include "titan/data/loader.h"
#include "unit/data/data_test_util.h"

namespace titan::data {
namespace {

using nlohmann::ordered_json;
using testing::TempDir;
using testing::write_file;

const std::string kQwen3Dir = titan::testing::source_path("../shared/assets/qwen3-tokenizer");
const std::string kLayouts = titan::testing::source_path("tests/fixtures/chat/layouts");

const Tokenizer& qwen3() {
  static const Tokenizer tok = Tokenizer::from_file(kQwen3Dir);
  return tok;
}

std::shared_ptr<const ChatTemplate> qwen3_chat() {
  static const auto chat = std::make_shared<const ChatTemplate>(ChatTemplate::from_folder(kQwen3Dir));
  return chat;
}

const ordered_json& expected() {
  static const ordered_json e = [] {
    std::ifstream in(kLayouts + "/expected.json");
    std::stringstream s;
    s << in.rdbuf();
    return ordered_json::parse(s.str());
  }();
  return e;
}

DatasetConfig layout_config(const std::string& file) {
  DatasetConfig c;
  c.path = kLayouts + "/" + file;
  c.format = "chat";
  if (file == "custom.jsonl") {
    c.chat_messages_field = "dialog";
    c.chat_role_key = "speaker";
    c.chat_content_key = "utterance";
    c.chat_role_map = "bot=assistant,person=user";
  }
  return c;
}

std::vector<std::vector<int64_t>> all_batches(LoaderConfig c) {
  c.infinite = false;
  Loader loader(c, qwen3());
  std::vector<std::vector<int64_t>> out;
  while (auto b = loader.next()) {
    out.emplace_back(b->inputs_BT.data<int64_t>(), b->inputs_BT.data<int64_t>() + b->inputs_BT.numel());
    out.emplace_back(b->labels_BT.data<int64_t>(), b->labels_BT.data<int64_t>() + b->labels_BT.numel());
  }
  return out;
}

LoaderConfig loader_config(const DatasetConfig& d) {
  LoaderConfig c;
  c.dataset = d;
  c.batch_size = 2;
  c.seq_len = 24;
  c.eot_id = qwen3().token_id("<|endoftext|>").value();
  c.chat = qwen3_chat();
  return c;
}

TEST(RowFormat, ChatLayoutsRenderAsTransformersRendersTheMappedMessages) {
  for (const auto& [file, key] : std::vector<std::pair<std::string, std::string>>{
           {"sharegpt.jsonl", "sharegpt"}, {"sharegpt.parquet", "sharegpt"}, {"alpaca.jsonl", "alpaca"},
           {"alpaca.parquet", "alpaca"}, {"renamed.jsonl", "renamed"}, {"custom.jsonl", "custom"}}) {
    SCOPED_TRACE(file);
    DocumentSource source(layout_config(file));
    EXPECT_EQ(source.format(), "chat");
    const ordered_json& cases = expected()[key];
    size_t n = 0;
    while (auto doc = source.next()) {
      ASSERT_LT(n, cases.size());
      const ordered_json& messages = doc->messages;
      EXPECT_EQ(messages, cases[n]["messages"]) << "row " << n;
      EXPECT_EQ(qwen3_chat()->render(messages, false), cases[n]["text"].get<std::string>()) << "row " << n;
      EXPECT_EQ(encode_chat(*qwen3_chat(), qwen3(), messages, true).ids, cases[n]["ids"].get<std::vector<int32_t>>());
      ++n;
    }
    EXPECT_EQ(n, cases.size());

    // Packed, with the assistant mask: the batches of the same conversations as messages JSONL.
    TempDir dir;
    std::string lines;
    for (const auto& c : cases) lines += ordered_json{{"messages", c["messages"]}}.dump() + "\n";
    write_file(dir.file("messages.jsonl"), lines);
    DatasetConfig messages;
    messages.path = dir.file("messages.jsonl");
    messages.format = "chat";
    EXPECT_EQ(all_batches(loader_config(layout_config(file))), all_batches(loader_config(messages)));
  }
}

TEST(RowFormat, AutoPicksTheLayoutFromTheFirstRow) {
  TempDir dir;
  write_file(dir.file("text.jsonl"), "{\"text\": \"hello\"}\n");
  write_file(dir.file("tokens.jsonl"), "{\"input_ids\": [1, 2]}\n");
  for (const auto& [file, format] : std::vector<std::pair<std::string, std::string>>{
           {dir.file("text.jsonl"), "text"}, {dir.file("tokens.jsonl"), "pretokenized"},
           {kLayouts + "/sharegpt.parquet", "chat"}, {kLayouts + "/alpaca.jsonl", "chat"}}) {
    DatasetConfig c;
    c.path = file;
    c.format = "auto";
    EXPECT_EQ(DocumentSource(c).format(), format) << file;
  }
}

TEST(RowFormat, UnknownLayoutIsOneLineNamingTheFields) {
  TempDir dir;
  write_file(dir.file("odd.jsonl"), "{\"prompt\": \"a\", \"completion\": \"b\"}\n");
  DatasetConfig c;
  c.path = dir.file("odd.jsonl");
  c.format = "chat";
  try {
    DocumentSource source(c);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(dir.file("odd.jsonl") + ":1: a row of an unknown layout: its fields are \"prompt\", "
                        "\"completion\""), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos);
    EXPECT_NE(what.find("HINT:"), std::string::npos);
  }
  EXPECT_THROW(parse_role_map("bot"), Error);
  EXPECT_THROW(parse_role_map("bot=robot"), Error);
  EXPECT_EQ(parse_role_map("bot=assistant,person=user").size(), 2u);
}

TEST(RowFormat, PretokenizedRowsPackAsTheTextTheyCameFrom) {
  TempDir dir;
  const std::vector<std::string> docs = testing::shakespeare(12);
  std::string text, tokens, labelled;
  for (const std::string& d : docs) {
    text += ordered_json{{"text", d}}.dump() + "\n";
    const std::vector<int32_t> ids = qwen3().encode(d);
    tokens += ordered_json{{"input_ids", ids}}.dump() + "\n";
    std::vector<int64_t> labels(ids.begin(), ids.end());
    labels[0] = -100;  // the first token of each document outside the loss
    labelled += ordered_json{{"input_ids", ids}, {"labels", labels}}.dump() + "\n";
  }
  write_file(dir.file("text.jsonl"), text);
  write_file(dir.file("tokens.jsonl"), tokens);
  write_file(dir.file("labelled.jsonl"), labelled);
  auto config = [&](const std::string& file, const std::string& format) {
    DatasetConfig d;
    d.path = dir.file(file);
    d.format = format;
    return loader_config(d);
  };
  const auto want = all_batches(config("text.jsonl", "text"));
  EXPECT_EQ(all_batches(config("tokens.jsonl", "pretokenized")), want);
  EXPECT_EQ(all_batches(config("tokens.jsonl", "auto")), want);

  // labels: -100 at each document's first token and at the appended eot; the same inputs.
  const auto masked = all_batches(config("labelled.jsonl", "pretokenized"));
  ASSERT_EQ(masked.size(), want.size());
  int64_t ignored = 0;
  for (size_t b = 0; b < want.size(); b += 2) {
    EXPECT_EQ(masked[b], want[b]);
    for (size_t i = 0; i < want[b + 1].size(); ++i) {
      if (masked[b + 1][i] == kIgnoreLabel) {
        ++ignored;
      } else {
        EXPECT_EQ(masked[b + 1][i], want[b + 1][i]);
      }
    }
  }
  EXPECT_GT(ignored, 0);

  write_file(dir.file("vocab.jsonl"), "{\"input_ids\": [1, 2]}\n{\"input_ids\": [5, 999999]}\n");
  try {
    all_batches(config("vocab.jsonl", "pretokenized"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocab.jsonl:2: token id 999999 is outside the model's vocabulary"),
              std::string::npos) << e.what();
  }
  write_file(dir.file("labels.jsonl"), "{\"input_ids\": [1, 2], \"labels\": [1, 3]}\n");
  try {
    all_batches(config("labels.jsonl", "pretokenized"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("labels[1] is 3, neither -100 nor input_ids[1] (2)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace titan::data
