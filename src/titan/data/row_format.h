// RowFormat: what one dataset row (a JSON object: a JSONL line, or a Parquet row) becomes — a text
// document, a chat conversation, or token ids — and the chat layouts published datasets use.
//
// Chat layouts (each becomes the {"role", "content"} list the chat template renders):
//   messages      OpenAI: "messages": [{"role", "content"}, ...] (other list or key names by config or
//                 detection: a list field "messages" / "conversations" / "conversation", a role key
//                 "role" / "from", a content key "content" / "value" / "text").
//   sharegpt      "conversations": [{"from": human|gpt|system|function_call|observation, "value"}, ...];
//                 roles mapped as LLaMA-Factory maps them: human -> user, gpt -> assistant, system,
//                 function_call -> assistant (a call is a turn the model writes), observation -> tool.
//                 A top-level "system" string becomes the first message.
//   alpaca        "instruction", "input", "output" [, "system", "history": [[user, assistant], ...]]:
//                 the user turn is instruction + "\n" + input (instruction alone when input is empty
//                 or null), the assistant turn is output, after the system prompt and the history.
// The layout is detected from the first row (or the Parquet schema) and said in one log line;
// DatasetConfig's chat_* fields override it. In Parquet rows a null field of a message is dropped
// (as if absent): Parquet gives every message every key of the column's struct.
//
// Pretokenized rows: "input_ids": [ids] and optionally "labels": [ids or -100], as Transformers
// and axolotl write them (labels[i] is token i's target as the model shifts it: -100 masks token i,
// any other value must equal input_ids[i]).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace titan::data {

struct DatasetConfig;

// One document of a dataset.
struct Document {
  std::string text;               // text: the document
  nlohmann::ordered_json messages;  // chat: the messages list (checked by check_messages)
  std::vector<int32_t> ids;     // pretokenized: the tokens
  std::vector<uint8_t> mask;    // pretokenized with labels: 1 where the token is a target; empty: all
  std::string where;            // "path:line" / "path: row N", for messages about this document
};

class RowFormat {
 public:
  // `config.format` is text, chat, pretokenized or auto (decided by the first row's fields).
  explicit RowFormat(const DatasetConfig& config);

  // Decides the layout from the first row's fields (or a Parquet schema's top-level fields) and logs
  // it for chat and auto; later calls do nothing. Returns "" when a layout fits, else why not, in
  // words. A message's role and content keys are found per message unless configured.
  std::string detect(const std::vector<std::string>& fields, const std::string& where);
  bool detected() const { return kind_ != Kind::undecided; }

  // The top-level fields a row must hold (for a Parquet reader's column selection), and those read
  // when present.
  std::vector<std::string> required_fields() const;
  std::vector<std::string> optional_fields() const;

  // The document of `row` into out (its `where` is left to the caller); false with `problem` set
  // (what is wrong, in words) for a row that does not fit the layout.
  // drop_nulls: a message's null fields are dropped (Parquet rows). The text field may be moved
  // out of `row`.
  bool document(nlohmann::ordered_json& row, Document& out, std::string& problem, bool drop_nulls = false) const;

  const std::string& format() const { return format_; }  // text, chat or pretokenized once detected

 private:
  enum class Kind { undecided, text, messages, alpaca, pretokenized };
  bool chat_document(const nlohmann::ordered_json& row, Document& out, std::string& problem, bool drop_nulls) const;
  bool tokens_document(const nlohmann::ordered_json& row, Document& out, std::string& problem) const;
  std::string map_role(const std::string& role) const;  // "" when unknown

  std::string format_;  // as configured (auto until detected)
  std::string text_field_;
  std::string messages_field_, role_key_, content_key_;  // configured ("" = detect)
  std::vector<std::pair<std::string, std::string>> role_map_;
  Kind kind_ = Kind::undecided;
};

// "a=b,c=d" -> {{a, b}, {c, d}}; throws naming the bad entry.
std::vector<std::pair<std::string, std::string>> parse_role_map(const std::string& text);

}  // namespace titan::data
