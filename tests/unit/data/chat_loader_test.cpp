// The packing loader on chat data: labels are -100 outside assistant spans (hand-checked positions
// from HF's ids), the mask rides with the carried tokens through the resumable state, and bad chat
// lines are one-line errors naming file:line (or are counted and skipped).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "titan/core/error.h"
#include "titan/core/log.h"
#include "titan/data/chat_template.h"
#include "titan/data/loader.h"
#include "unit/data/data_test_util.h"

namespace titan::data {
namespace {

using nlohmann::ordered_json;
using testing::TempDir;
using testing::write_file;

const std::string kQwen3Dir = titan::testing::source_path("../shared/assets/qwen3-tokenizer");

const Tokenizer& qwen3() {
  static const Tokenizer tok = Tokenizer::from_file(kQwen3Dir);
  return tok;
}
int32_t eot() { return qwen3().token_id("<|endoftext|>").value(); }

std::vector<int64_t> values(const Tensor& t) { return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel()); }

// The fixture case thinking_earlier_only (add_generation_prompt false): messages and HF's ids.
std::pair<ordered_json, std::vector<int32_t>> earlier_thinking_case() {
  std::ifstream in(titan::testing::source_path("tests/fixtures/chat/chat_templates.json"));
  std::stringstream buf;
  buf << in.rdbuf();
  const ordered_json f = ordered_json::parse(buf.str());
  for (const auto& c : f["templates"]["qwen3"]["cases"]) {
    if (c["name"] == "thinking_earlier_only" && c["options"] == ordered_json{{"add_generation_prompt", false}}) {
      return {c["messages"], c["ids"].get<std::vector<int32_t>>()};
    }
  }
  ADD_FAILURE() << "fixture case missing";
  return {};
}

std::string chat_line(const ordered_json& messages) { return ordered_json{{"messages", messages}}.dump() + "\n"; }

LoaderConfig chat_config(const std::string& path, int64_t B, int64_t T) {
  LoaderConfig c;
  c.dataset.path = path;
  c.dataset.format = "chat";
  c.batch_size = B;
  c.seq_len = T;
  c.eot_id = eot();
  c.chat = std::make_shared<const ChatTemplate>(ChatTemplate::from_folder(kQwen3Dir));
  return c;
}

std::string error_of(LoaderConfig c) {
  c.infinite = false;  // read the whole file once
  try {
    Loader loader(c, qwen3());
    while (loader.next()) {
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// 59 HF ids + eot = 60 tokens = one row of T = 59. Kept tokens (by hand from HF's ids): 16..24
// ("2 + 3 = 5.<|im_end|>") and 39..57 ("<think>\n\n</think>\n\n(2 + 3) x 4 = 20.<|im_end|>"); label t
// is token t + 1, so labels 15..23 and 38..56 are kept, every other label (eot's too) is -100.
TEST(ChatLoader, LabelsAreMaskedOutsideAssistantTokens) {
  TempDir dir;
  const auto [messages, ids] = earlier_thinking_case();
  ASSERT_EQ(ids.size(), 59u);
  write_file(dir.file("chat.jsonl"), chat_line(messages));
  LoaderConfig c = chat_config(dir.file("chat.jsonl"), 1, 59);
  Loader loader(c, qwen3());
  const Batch b = loader.next().value();
  std::vector<int64_t> want_inputs(ids.begin(), ids.end());
  EXPECT_EQ(values(b.inputs_BT), want_inputs);
  std::vector<int64_t> want_labels(59, -100);
  for (int t = 15; t <= 23; ++t) want_labels[t] = ids[t + 1];
  for (int t = 38; t <= 56; ++t) want_labels[t] = ids[t + 1];
  EXPECT_EQ(values(b.labels_BT), want_labels);
  EXPECT_EQ(values(b.labels_BT)[23], 151645);  // <|im_end|> is a target; the "\n" after it is not

  c.mask_non_assistant = false;  // every token a target, the appended eot too
  Loader all(c, qwen3());
  const Batch a = all.next().value();
  std::vector<int64_t> shifted(ids.begin() + 1, ids.end());
  shifted.push_back(eot());
  EXPECT_EQ(values(a.labels_BT), shifted);
}

TEST(ChatLoader, StateCarriesTheMaskAndResumesIdentically) {
  set_log_level(LogLevel::warn);
  TempDir dir;
  std::string lines;
  for (int i = 0; i < 7; ++i) {
    lines += chat_line(ordered_json::array(
        {{{"role", "system"}, {"content", "Be terse."}},
         {{"role", "user"}, {"content", "Count to " + std::to_string(i + 2) + "."}},
         {{"role", "assistant"}, {"content", "<think>\nEasy.\n</think>\n\n" + std::string(static_cast<size_t>(i + 2), '1')}},
         {{"role", "user"}, {"content", "Again?"}},
         {{"role", "assistant"}, {"content", "Sure: " + std::to_string(i)}}}));
  }
  write_file(dir.file("c.jsonl"), lines);
  const LoaderConfig c = chat_config(dir.file("c.jsonl"), 2, 23);
  for (int k : {1, 3, 9}) {
    Loader original(c, qwen3());
    for (int i = 0; i < k; ++i) ASSERT_TRUE(original.next());
    const LoaderState s = original.state();
    ASSERT_TRUE(s.carry.empty() && s.carry_mask.empty()) << "the mask is rebuilt with the tokens";
    const std::string saved = s.to_json();
    Loader resumed(c, qwen3());
    resumed.restore(LoaderState::from_json(saved));
    int64_t masked = 0;
    for (int i = 0; i < 6; ++i) {
      const Batch want = original.next().value();
      const Batch got = resumed.next().value();
      EXPECT_EQ(values(got.inputs_BT), values(want.inputs_BT)) << k << " " << i;
      EXPECT_EQ(values(got.labels_BT), values(want.labels_BT)) << k << " " << i;
      EXPECT_EQ(values(got.positions_BT), values(want.positions_BT)) << k << " " << i;
      for (int64_t l : values(got.labels_BT)) masked += l == -100;
    }
    EXPECT_GT(masked, 0);
    EXPECT_EQ(resumed.state().to_json(), original.state().to_json());
  }
  // A state without carry_mask (written before chat data) counts every carried label.
  LoaderState old;
  old.carry = {1, 2, 3};
  nlohmann::json j = nlohmann::json::parse(old.to_json());
  j.erase("carry_mask");
  EXPECT_EQ(LoaderState::from_json(j.dump()).carry_mask, (std::vector<uint8_t>{1, 1, 1}));
  j["carry_mask"] = "10";
  try {
    LoaderState::from_json(j.dump());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"carry_mask\" must be a string of 3 '0'/'1' characters"), std::string::npos);
  }
}

TEST(ChatLoader, BadLinesAreOneLineErrorsNamingFileAndLine) {
  TempDir dir;
  const std::string good = chat_line(ordered_json::parse(R"([{"role":"user","content":"a"},{"role":"assistant","content":"b"}])"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"text\": \"plain\"}", "no field \"messages\""},
      {"{\"messages\": {\"role\": \"user\"}}", "\"messages\" must be a list of {role, content}, got a JSON object"},
      {"{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}", "unknown role \"robot\""},
      {"{\"messages\": [{\"role\": \"user\", \"content\": 7}]}", "\"content\" must be a string, got a JSON number"},
  };
  for (const auto& [line, what] : cases) {
    write_file(dir.file("bad.jsonl"), good + line + "\n");
    const std::string e = error_of(chat_config(dir.file("bad.jsonl"), 1, 16));
    EXPECT_NE(e.find(dir.file("bad.jsonl") + ":2: "), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
    EXPECT_NE(e.find("HINT:"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  std::string all = good;
  for (const auto& [line, what] : cases) all += line + "\n";
  write_file(dir.file("skip.jsonl"), all + good);
  LoaderConfig skip = chat_config(dir.file("skip.jsonl"), 1, 8);
  skip.dataset.skip_bad_lines = true;
  skip.infinite = false;
  Loader loader(skip, qwen3());
  while (loader.next()) {
  }
  EXPECT_EQ(loader.num_bad_lines(), 4);

  write_file(dir.file("chat.txt"), "hello");
  EXPECT_NE(error_of(chat_config(dir.file("chat.txt"), 1, 8)).find("chat data must be JSONL"), std::string::npos);
  LoaderConfig no_template = chat_config(dir.file("skip.jsonl"), 1, 8);
  no_template.chat.reset();
  EXPECT_NE(error_of(no_template).find("there is no chat template to render it"), std::string::npos);
}

}  // namespace
}  // namespace titan::data
