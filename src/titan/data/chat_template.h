// Chat data: a tokenizer folder's chat template (Jinja, see jinja.h) rendered as Transformers'
// apply_chat_template renders it, then tokenized with a per-token loss mask.
//
// Messages are a JSON array of {"role": "system"|"user"|"assistant", "content": string, ...};
// other keys (reasoning_content, tool_calls) pass through to the template untouched.
//
// Assistant spans (what mask_non_assistant keeps), HF's {% generation %} convention: an assistant
// message's content as the template renders it *in the full conversation* (so Qwen3's thinking
// block is trained where Qwen3 keeps it, in turns after the last user query, and not where it drops
// it) and the end-of-turn marker the template emits after it (<|im_end|>, <|eot_id|>); the
// assistant header (<|im_start|>assistant\n) and the newline after the marker are not in it.
// How it is found, for assistant message i of a conversation rendered whole as F:
//   start = size of render(messages[:i], add_generation_prompt=true), which must be a prefix of F
//           (the generation prompt is the header the model is prompted with);
//   end   = the end of the first end-of-turn marker in F at or after start. The marker is what the
//           template writes after an assistant message's text, trailing whitespace removed, found
//           once by rendering [user "PROBE_U", assistant "PROBE_A"].
// A template for which either step fails is an error naming the step, never a guessed mask.
// Token k is kept when any of its bytes lies inside a span, as Transformers marks tokens for
// return_assistant_tokens_mask (ids come from encoding F whole, so they equal HF's
// apply_chat_template(tokenize=True)); tests check the mask against HF's on a ChatML template with
// {% generation %} markers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "titan/data/jinja.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

class ChatTemplate {
 public:
  // `source`: the template text; `where` names it in errors; `variables`: extra template variables
  // (bos_token, eos_token, ...), an object.
  ChatTemplate(std::string source, std::string where, nlohmann::ordered_json variables = nlohmann::ordered_json::object());
  // The folder's template, as AutoTokenizer finds it (first found): dir/chat_template.jinja,
  // tokenizer_config.json's "chat_template" (a string, or a list of {name, template}: "default"),
  // then a processor's chat_template.json; tokenizer_config.json's bos_token / eos_token /
  // pad_token / unk_token are variables. Throws naming the file and the fix when there is none.
  static ChatTemplate from_folder(const std::string& dir);

  // apply_chat_template(messages, tokenize=False, add_generation_prompt, **options): `options` is
  // an object of extra variables for this call (enable_thinking, date_string, ...).
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& options = nlohmann::ordered_json::object(),
                     jinja::Template::MessageTrace* trace = nullptr) const;

  // Byte ranges [begin, end) of the assistant spans of rendered = render(messages, false, options)
  // (see the top; the prefixes are rendered with the same options).
  std::vector<std::pair<size_t, size_t>> assistant_spans(
      const nlohmann::ordered_json& messages, const std::string& rendered,
      const nlohmann::ordered_json& options = nlohmann::ordered_json::object()) const;
  // The same spans the way the top describes, one prefix render per assistant turn: the reference
  // that assistant_spans equals (it takes a one-render path on long conversations, checked
  // against this one at several turns).
  std::vector<std::pair<size_t, size_t>> assistant_spans_by_prefixes(
      const nlohmann::ordered_json& messages, const std::string& rendered,
      const nlohmann::ordered_json& options = nlohmann::ordered_json::object()) const;
  // The end-of-turn marker (found by a probe render at construction; throws, naming why, when the
  // template has none: only masking needs it).
  const std::string& end_of_turn() const;

 private:
  jinja::Template template_;
  std::string where_;
  nlohmann::ordered_json variables_;
  std::string end_of_turn_;  // "" when the probe failed; then end_of_turn_error_ says why
  std::string end_of_turn_error_;
  void probe_end_of_turn();
  // Spans from each assistant turn's start (`heads`, byte offsets into `rendered`) to the end of
  // the first end-of-turn marker after it; throws when a turn has none or starts inside another.
  std::vector<std::pair<size_t, size_t>> spans_from_heads(const std::vector<size_t>& assistants,
                                                          const std::vector<size_t>& heads,
                                                          const std::string& rendered) const;
};
// A ChatTemplate is immutable after construction: one may be shared by loaders on several threads.

struct ChatTokens {
  std::vector<int32_t> ids;
  std::vector<uint8_t> mask;  // 1: a target the loss counts (assistant span, or everything)
};

// Renders `messages` (add_generation_prompt false), encodes the text whole, and marks each token:
// all 1 when !mask_non_assistant, else 1 only inside assistant spans.
ChatTokens encode_chat(const ChatTemplate& chat, const Tokenizer& tokenizer, const nlohmann::ordered_json& messages,
                       bool mask_non_assistant);

// "" when `messages` is a chat conversation this loader takes (a non-empty list of objects with a
// role in system/user/assistant/tool and a string content), else what is wrong with it, in words.
std::string check_messages(const nlohmann::ordered_json& messages);

}  // namespace titan::data
