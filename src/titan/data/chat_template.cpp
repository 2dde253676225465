// Chat templates: loading from a tokenizer folder, rendering, assistant spans and the masked
// encoding (contract in chat_template.h).
#include "titan/data/chat_template.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "titan/core/error.h"
#include "titan/core/nesting.h"

namespace titan::data {

using nlohmann::ordered_json;

ChatTemplate::ChatTemplate(std::string source, std::string where, ordered_json variables)
    : template_(std::move(source), where), where_(std::move(where)), variables_(std::move(variables)) {
  TITAN_CHECK(variables_.is_object(), "[chat] ", where_, ": template variables must be a JSON object");
  probe_end_of_turn();
}

namespace {

// The whole file, or nullopt when it does not exist.
std::optional<std::string> read_if_present(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;
  TITAN_CHECK(std::filesystem::is_regular_file(path, ec), "[chat] ", path.string(), ": not a regular file. HINT: "
              "it must be the file itself");
  std::ifstream in(path, std::ios::binary);
  TITAN_CHECK(in.good(), "[chat] ", path.string(), ": cannot be read. HINT: check its permissions");
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

ordered_json parse_object(const std::string& text, const std::string& path) {
  check_json_nesting(text, str("[chat] ", path));
  ordered_json j = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  TITAN_CHECK(!j.is_discarded() && j.is_object(), "[chat] ", path, ": not a JSON object");
  return j;
}

// A "chat_template" value: a string, or a list of {name, template} of which "default" is used
// (what Transformers' apply_chat_template picks when no template name is given).
std::string template_of(const ordered_json& value, const std::string& path) {
  if (value.is_string()) return value.get<std::string>();
  TITAN_CHECK(value.is_array(), "[chat] ", path, ": \"chat_template\" is a ", value.type_name(),
              ", expected a string or a list of {\"name\", \"template\"}");
  for (const auto& t : value) {  // [{"name": "default", "template": ...}, {"name": "tool_use", ...}]
    if (t.is_object() && t.value("name", "") == "default" && t.contains("template") && t["template"].is_string()) {
      return t["template"].get<std::string>();
    }
  }
  TITAN_FAIL("[chat] ", path, ": \"chat_template\" is a list without a \"default\" entry. "
             "HINT: name one of its templates \"default\"");
}

}  // namespace

// Where the template comes from, first found wins. Transformers 5.25's tokenizer
// (tokenization_utils_base.py _from_pretrained: "independent chat template file(s) ... take priority
// over template entries in the tokenizer config") reads chat_template.jinja over tokenizer_config.json;
// it never reads chat_template.json, which only a processor reads (processing_utils.py). So:
//   1. chat_template.jinja       (the text; what Transformers >= 4.50 writes beside tokenizer_config.json)
//   2. tokenizer_config.json's "chat_template" (a string, or a list whose "default" entry is used)
//   3. chat_template.json's "chat_template" (a processor's legacy file), when the tokenizer has none:
//      there AutoTokenizer would have no template, and the processor's is the model's.
// bos/eos/pad/unk tokens come from tokenizer_config.json when it exists.
ChatTemplate ChatTemplate::from_folder(const std::string& dir) {
  const std::filesystem::path root(dir);
  const std::string config_path = (root / "tokenizer_config.json").string();
  const std::optional<std::string> config_text = read_if_present(config_path);
  const ordered_json config = config_text ? parse_object(*config_text, config_path) : ordered_json::object();
  const auto config_template = config.find("chat_template");

  std::string source, where;
  const std::string jinja_path = (root / "chat_template.jinja").string();
  const std::string json_path = (root / "chat_template.json").string();
  if (std::optional<std::string> text = read_if_present(jinja_path)) {
    source = std::move(*text);
    where = jinja_path;
  } else if (config_template != config.end() && !config_template->is_null()) {
    source = template_of(*config_template, config_path);
    where = config_path + " chat_template";
  } else if (std::optional<std::string> json_text = read_if_present(json_path)) {
    const ordered_json j = parse_object(*json_text, json_path);
    auto it = j.find("chat_template");
    TITAN_CHECK(it != j.end() && !it->is_null(), "[chat] ", json_path, " has no \"chat_template\". HINT: write "
                "{\"chat_template\": \"...\"} in it, or put the template in chat_template.jinja");
    source = template_of(*it, json_path);
    where = json_path + " chat_template";
  } else if (config_text) {
    TITAN_FAIL("[chat] ", config_path, " has no \"chat_template\" and there is no chat_template.jinja or "
               "chat_template.json beside it. HINT: use the tokenizer folder of an instruct/chat model, add a "
               "chat_template.jinja to it, or set training.dataset_format text");
  } else {
    TITAN_FAIL("[chat] ", dir, ": no chat template (no chat_template.jinja, tokenizer_config.json or "
               "chat_template.json). HINT: chat data needs model.hf_assets_path to be the tokenizer folder of an "
               "instruct/chat model");
  }
  ordered_json vars = ordered_json::object();
  for (const char* name : {"bos_token", "eos_token", "pad_token", "unk_token"}) {
    auto t = config.find(name);
    if (t == config.end()) continue;
    if (t->is_string()) vars[name] = *t;
    else if (t->is_object() && t->contains("content") && (*t)["content"].is_string()) vars[name] = (*t)["content"];
    else if (t->is_null()) vars[name] = nullptr;
  }
  return ChatTemplate(std::move(source), where, std::move(vars));
}

std::string ChatTemplate::render(const ordered_json& messages, bool add_generation_prompt,
                                 const ordered_json& options, jinja::Template::MessageTrace* trace) const {
  ordered_json vars = variables_;
  vars["messages"] = messages;
  vars["add_generation_prompt"] = add_generation_prompt;
  for (auto it = options.begin(); it != options.end(); ++it) vars[it.key()] = it.value();
  const jinja::Value v = jinja::Value::from_json(vars);
  return trace == nullptr ? template_.render(v) : template_.render(v, *trace);
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

namespace {

ordered_json first_messages(const ordered_json& messages, size_t count) {
  ordered_json prefix = ordered_json::array();
  for (size_t k = 0; k < count; ++k) prefix.push_back(messages[k]);
  return prefix;
}

// Up to `most` of the indices [0, n): the first, the last and evenly spaced between.
std::vector<size_t> spread(size_t n, size_t most) {
  std::vector<size_t> out;
  for (size_t k = 0; k < most && k < n; ++k) {
    const size_t at = n <= most ? k : k * (n - 1) / (most - 1);
    if (out.empty() || out.back() != at) out.push_back(at);
  }
  return out;
}

}  // namespace

std::vector<std::pair<size_t, size_t>> ChatTemplate::spans_from_heads(const std::vector<size_t>& assistants,
                                                                      const std::vector<size_t>& heads,
                                                                      const std::string& rendered) const {
  std::vector<std::pair<size_t, size_t>> spans;
  const std::string& marker = end_of_turn();
  for (size_t k = 0; k < assistants.size(); ++k) {
    const size_t i = assistants[k];
    const size_t end = rendered.find(marker, heads[k]);
    TITAN_CHECK(end != std::string::npos, "[chat] ", where_, ": message ", i, " (assistant): no end-of-turn marker '",
                marker, "' after it. HINT: set training.mask_non_assistant false");
    TITAN_CHECK(spans.empty() || heads[k] >= spans.back().second, "[chat] ", where_, ": message ", i,
                " (assistant) starts inside the previous assistant turn (its content holds '", marker, "'?)");
    spans.emplace_back(heads[k], end + marker.size());
  }
  return spans;
}

std::vector<std::pair<size_t, size_t>> ChatTemplate::assistant_spans_by_prefixes(const ordered_json& messages,
                                                                                 const std::string& rendered,
                                                                                 const ordered_json& options) const {
  std::vector<size_t> assistants, heads;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].value("role", "") != "assistant") continue;
    const std::string head = render(first_messages(messages, i), true, options);
    TITAN_CHECK(rendered.compare(0, head.size(), head) == 0, "[chat] ", where_, ": message ", i,
                " (assistant): the conversation up to it, rendered with add_generation_prompt, is not a prefix of the "
                "whole conversation, so its tokens cannot be found. HINT: set training.mask_non_assistant false");
    assistants.push_back(i);
    heads.push_back(head.size());
  }
  return spans_from_heads(assistants, heads, rendered);
}

std::vector<std::pair<size_t, size_t>> ChatTemplate::assistant_spans(const ordered_json& messages,
                                                                     const std::string& rendered,
                                                                     const ordered_json& options) const {
  // The reference renders the conversation up to each assistant turn: quadratic in the turns (a
  // conversation of 8,000 took 51 s). With more turns than it checks, one traced render gives where
  // each message starts; the heads are then start + the generation prompt, taken when the
  // reference's own heads at kCheckedTurns turns (first, last, evenly between) equal them, so a
  // template whose rendering of a turn depends on what follows (loop.last, a last-query index)
  // falls back to the reference rather than guess.
  constexpr size_t kCheckedTurns = 8;
  std::vector<size_t> assistants;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (messages[i].value("role", "") == "assistant") assistants.push_back(i);
  }
  if (assistants.size() <= kCheckedTurns) return assistant_spans_by_prefixes(messages, rendered, options);
  jinja::Template::MessageTrace trace;
  const bool one_loop = render(messages, false, options, &trace) == rendered && trace.loops.size() == 1 &&
                        trace.loops[0].size() == messages.size();
  std::vector<size_t> heads;
  std::string prompt;
  bool agree = one_loop;
  const std::vector<size_t> checked = spread(assistants.size(), kCheckedTurns);
  for (size_t c = 0; agree && c < checked.size(); ++c) {
    const size_t i = assistants[checked[c]], start = trace.loops[0][i];
    const std::string head = render(first_messages(messages, i), true, options);
    if (c == 0 && head.size() >= start) prompt = head.substr(start);
    agree = head.size() == start + prompt.size() && head.compare(start, std::string::npos, prompt) == 0 &&
            rendered.compare(0, head.size(), head) == 0;
  }
  for (size_t k = 0; agree && k < assistants.size(); ++k) {
    const size_t start = trace.loops[0][assistants[k]];
    agree = rendered.compare(start, prompt.size(), prompt) == 0;
    heads.push_back(start + prompt.size());
  }
  if (!agree) return assistant_spans_by_prefixes(messages, rendered, options);
  return spans_from_heads(assistants, heads, rendered);
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
