// Chat templates: loading from a tokenizer folder, rendering, assistant spans and the masked
// encoding (contract in chat_template.h).
#include "titan/data/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "titan/core/error.h"

namespace titan::data {

using nlohmann::ordered_json;

ChatTemplate::ChatTemplate(std::string source, std::string where, ordered_json variables)
    : template_(std::move(source), where), where_(std::move(where)), variables_(std::move(variables)) {
  TITAN_CHECK(variables_.is_object(), "[chat] ", where_, ": template variables must be a JSON object");
  probe_end_of_turn();
}

ChatTemplate ChatTemplate::from_folder(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "tokenizer_config.json").string();
  std::ifstream in(path, std::ios::binary);
  TITAN_CHECK(in.good(), "[chat] ", path, ": no such file. HINT: chat data needs model.hf_assets_path to be a "
              "tokenizer folder whose tokenizer_config.json holds a chat_template");
  std::stringstream buf;
  buf << in.rdbuf();
  ordered_json j = ordered_json::parse(buf.str(), nullptr, /*allow_exceptions=*/false);
  TITAN_CHECK(!j.is_discarded() && j.is_object(), "[chat] ", path, ": not a JSON object");
  auto it = j.find("chat_template");
  TITAN_CHECK(it != j.end() && !it->is_null(), "[chat] ", path, " has no \"chat_template\". HINT: use the "
              "tokenizer folder of an instruct/chat model, add a chat_template to it, or set "
              "training.dataset_format text");
  std::string source;
  if (it->is_string()) {
    source = it->get<std::string>();
  } else if (it->is_array()) {  // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
    for (const auto& t : *it) {
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string()) {
        source = t["template"].get<std::string>();
      }
    }
    TITAN_CHECK(!source.empty(), "[chat] ", path, ": \"chat_template\" is a list without a \"default\" entry. "
                "HINT: name one of its templates \"default\"");
  } else {
    TITAN_FAIL("[chat] ", path, ": \"chat_template\" is a ", it->type_name(), ", expected a string");
  }
  ordered_json vars = ordered_json::object();
  for (const char* name : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    auto t = j.find(name);
    if (t == j.end()) continue;
    if (t->is_string()) vars[name] = *t;
    else if (t->is_object() && t->contains("content") && (*t)["content"].is_string()) vars[name] = (*t)["content"];
    else if (t->is_null()) vars[name] = nullptr;
  }
  return ChatTemplate(std::move(source), path + " chat_template", std::move(vars));
}

std::string ChatTemplate::render(const ordered_json& messages, bool add_generation_prompt,
                                 const ordered_json& options) const {
  ordered_json vars = variables_;
  vars["messages"] = messages;
  vars["add_generation_prompt"] = add_generation_prompt;
  for (auto it = options.begin(); it != options.end(); ++it) vars[it.key()] = it.value();
  return template_.render(jinja::Value::from_json(vars));
}

const std::string& ChatTemplate::end_of_turn() const {
  if (end_of_turn_.empty()) throw Error(end_of_turn_error_);
  return end_of_turn_;
}

void ChatTemplate::probe_end_of_turn() {
  try {
    const std::string probe = "PROBE_A";
    const ordered_json conv = ordered_json::array({{{"role", "user"}, {"content", "PROBE_U"}},
                                                   {{"role", "assistant"}, {"content", probe}}});
    const std::string text = render(conv, false);
    const size_t at = text.rfind(probe);
    TITAN_CHECK(at != std::string::npos, "[chat] ", where_, ": the template does not print an assistant message's "
                "content, so assistant tokens cannot be found. HINT: set training.mask_non_assistant false");
    std::string marker = text.substr(at + probe.size());
    while (!marker.empty() && (marker.back() == '\n' || marker.back() == ' ')) marker.pop_back();
    TITAN_CHECK(!marker.empty(), "[chat] ", where_, ": the template writes nothing after an assistant message (no "
                "end-of-turn marker such as <|im_end|>), so the end of an assistant turn cannot be found. HINT: set "
                "training.mask_non_assistant false");
    end_of_turn_ = marker;
  } catch (const Error& e) {  // kept for end_of_turn(): a template may render well and still have no marker
    end_of_turn_error_ = e.what();
  }
}

std::vector<std::pair<size_t, size_t>> ChatTemplate::assistant_spans(const ordered_json& messages,
                                                                     const std::string& rendered,
                                                                     const ordered_json& options) const {
  std::vector<std::pair<size_t, size_t>> spans;
  const std::string& marker = end_of_turn();
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].value("role", "") != "assistant") continue;
    ordered_json prefix = ordered_json::array();
    for (size_t k = 0; k < i; ++k) prefix.push_back(messages[k]);
    const std::string head = render(prefix, true, options);
    TITAN_CHECK(rendered.compare(0, head.size(), head) == 0, "[chat] ", where_, ": message ", i,
                " (assistant): the conversation up to it, rendered with add_generation_prompt, is not a prefix of the "
                "whole conversation, so its tokens cannot be found. HINT: set training.mask_non_assistant false");
    const size_t end = rendered.find(marker, head.size());
    TITAN_CHECK(end != std::string::npos, "[chat] ", where_, ": message ", i, " (assistant): no end-of-turn marker '",
                marker, "' after it. HINT: set training.mask_non_assistant false");
    TITAN_CHECK(spans.empty() || head.size() >= spans.back().second, "[chat] ", where_, ": message ", i,
                " (assistant) starts inside the previous assistant turn (its content holds '", marker, "'?)");
    spans.emplace_back(head.size(), end + marker.size());
  }
  return spans;
}

ChatTokens encode_chat(const ChatTemplate& chat, const Tokenizer& tokenizer, const ordered_json& messages,
                       bool mask_non_assistant) {
  const std::string text = chat.render(messages, false);
  ChatTokens out;
  out.ids = tokenizer.encode(text);
  out.mask.assign(out.ids.size(), mask_non_assistant ? 0 : 1);
  if (!mask_non_assistant) return out;
  const auto spans = chat.assistant_spans(messages, text);
  size_t offset = 0, s = 0;
  for (size_t k = 0; k < out.ids.size(); ++k) {
    const size_t end = offset + tokenizer.decode(std::span<const int32_t>(&out.ids[k], 1)).size();
    while (s < spans.size() && offset >= spans[s].second) ++s;
    // any overlap, as HF's char_to_token marking does (a "\n\n" token across the header's newline and
    // a content that starts with one is kept)
    if (s < spans.size() && end > spans[s].first && offset < spans[s].second) out.mask[k] = 1;
    offset = end;
  }
  TITAN_CHECK(offset == text.size(), "[chat] the tokens of a rendered conversation decode to ", offset,
              " bytes, the text has ", text.size(), ". HINT: the tokenizer does not round-trip this text");
  return out;
}

std::string check_messages(const ordered_json& messages) {
  if (!messages.is_array()) return str("\"messages\" must be a list of {role, content}, got a JSON ", messages.type_name());
  if (messages.empty()) return "\"messages\" is an empty list";
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!m.is_object()) return str("messages[", i, "] must be an object {role, content}, got a JSON ", m.type_name());
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return str("messages[", i, "] has no string \"role\"");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      return str("messages[", i, "] has the unknown role \"", r, "\" (expected system, user, assistant or tool)");
    }
    auto content = m.find("content");
    if (content == m.end()) return str("messages[", i, "] (", r, ") has no \"content\"");
    if (!content->is_string()) {
      return str("messages[", i, "] (", r, "): \"content\" must be a string, got a JSON ", content->type_name());
    }
  }
  return "";
}

}  // namespace titan::data
