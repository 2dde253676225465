#include "titan/data/row_format.h"

#include <algorithm>

#include "titan/core/error.h"
#include "titan/core/log.h"
#include "titan/data/chat_template.h"
#include "titan/data/dataset.h"

namespace titan::data {

using nlohmann::ordered_json;

namespace {

// Published role names -> the chat template's, as LLaMA-Factory maps ShareGPT's tags.
const std::vector<std::pair<std::string, std::string>> kDefaultRoles = {
    {"system", "system"}, {"user", "user"},           {"assistant", "assistant"}, {"tool", "tool"},
    {"human", "user"},    {"gpt", "assistant"},       {"model", "assistant"},     {"function_call", "assistant"},
    {"observation", "tool"}};

const std::vector<std::string> kListFields = {"messages", "conversations", "conversation"};

bool has(const std::vector<std::string>& fields, const std::string& f) {
  return std::find(fields.begin(), fields.end(), f) != fields.end();
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "\"" : ", \"") + x + "\"";
  return s.empty() ? "none" : s;
}

// A string field of `row`: its text, "" when absent or null; false when it is another type.
bool optional_string(const ordered_json& row, const char* key, std::string& out) {
  out.clear();
  const auto it = row.find(key);
  if (it == row.end() || it->is_null()) return true;
  if (!it->is_string()) return false;
  out = it->get<std::string>();
  return true;
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_role_map(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> map;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, comma - start);
    const size_t eq = entry.find('=');
    TITAN_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < entry.size(), "[data] training.chat_role_map entry '",
                entry, "' is not FROM=TO. HINT: e.g. human=user,gpt=assistant,bot=assistant");
    const std::string to = entry.substr(eq + 1);
    TITAN_CHECK(to == "system" || to == "user" || to == "assistant" || to == "tool", "[data] training.chat_role_map "
                "maps '", entry.substr(0, eq), "' to '", to, "'. HINT: map to system, user, assistant or tool");
    map.emplace_back(entry.substr(0, eq), to);
    start = comma + 1;
  }
  return map;
}

RowFormat::RowFormat(const DatasetConfig& c)
    : format_(c.format),
      text_field_(c.text_field),
      messages_field_(c.chat_messages_field),
      role_key_(c.chat_role_key),
      content_key_(c.chat_content_key) {
  TITAN_CHECK(format_ == "text" || format_ == "chat" || format_ == "pretokenized" || format_ == "auto",
              "[data] dataset format '", format_, "' is not text, chat, pretokenized or auto");
  role_map_ = parse_role_map(c.chat_role_map);  // configured entries first: they win
  role_map_.insert(role_map_.end(), kDefaultRoles.begin(), kDefaultRoles.end());
  if (format_ == "text") kind_ = Kind::text;
  if (format_ == "pretokenized") kind_ = Kind::pretokenized;
  if (format_ == "chat" && !messages_field_.empty()) kind_ = Kind::messages;
}

std::string RowFormat::detect(const std::vector<std::string>& fields, const std::string& where) {
  if (detected()) return "";
  const bool chat = format_ == "chat" || format_ == "auto";
  std::string list;
  for (const auto& f : kListFields) {
    if (list.empty() && has(fields, f)) list = f;
  }
  if (chat && !list.empty()) {
    kind_ = Kind::messages;
    messages_field_ = list;
    log_info(str("[data] chat rows: the list \"", list, "\" of messages (", list == "conversations" ? "ShareGPT" : "OpenAI",
                 " layout; roles human/gpt/function_call/observation map to user/assistant/assistant/tool), from ", where));
  } else if (chat && has(fields, "instruction") && has(fields, "output")) {
    kind_ = Kind::alpaca;
    log_info(str("[data] chat rows: Alpaca layout (instruction + \"\\n\" + input -> user, output -> assistant",
                 has(fields, "system") ? ", system" : "", has(fields, "history") ? ", history" : "", "), from ", where));
  } else if (format_ == "auto" && has(fields, "input_ids")) {
    kind_ = Kind::pretokenized;
    log_info(str("[data] pretokenized rows (input_ids", has(fields, "labels") ? " + labels" : "", "), from ", where));
  } else if (format_ == "auto" && has(fields, text_field_)) {
    kind_ = Kind::text;
    log_info(str("[data] text rows (the field \"", text_field_, "\"), from ", where));
  } else {
    return str("a row of an unknown layout: its fields are ", joined(fields), " (chat rows hold \"messages\" (OpenAI), "
               "\"conversations\" (ShareGPT) or \"instruction\" + \"output\" (Alpaca); training.chat_messages_field names "
               "another list", format_ == "auto" ? str("; text rows hold \"", text_field_, "\"; pretokenized rows \"input_ids\"")
                                                 : std::string(), ")");
  }
  if (format_ == "auto") format_ = kind_ == Kind::text ? "text" : kind_ == Kind::pretokenized ? "pretokenized" : "chat";
  return "";
}

std::vector<std::string> RowFormat::required_fields() const {
  switch (kind_) {
    case Kind::text: return {text_field_};
    case Kind::messages: return {messages_field_};
    case Kind::alpaca: return {"instruction", "output"};
    case Kind::pretokenized: return {"input_ids"};
    default: return {};
  }
}

std::vector<std::string> RowFormat::optional_fields() const {
  switch (kind_) {
    case Kind::messages: return {"system"};
    case Kind::alpaca: return {"input", "system", "history"};
    case Kind::pretokenized: return {"labels"};
    default: return {};
  }
}

std::string RowFormat::map_role(const std::string& role) const {
  for (const auto& [from, to] : role_map_) {
    if (from == role) return to;
  }
  return "";
}

bool RowFormat::document(ordered_json& row, Document& out, std::string& problem, bool drop_nulls) const {
  switch (kind_) {
    case Kind::text: {
      const auto it = row.find(text_field_);  // (mutable: the text is moved out)
      if (it == row.end()) {
        problem = str("no field \"", text_field_, "\" (training.dataset_text_field, or titan tokenize --field, names the "
                      "document's field)");
        return false;
      }
      if (!it->is_string()) {
        problem = str("field \"", text_field_, "\" is a ", it->type_name(), ", expected a string");
        return false;
      }
      out.text = std::move(it->get_ref<std::string&>());
      return true;
    }
    case Kind::pretokenized: return tokens_document(row, out, problem);
    case Kind::messages: case Kind::alpaca: return chat_document(row, out, problem, drop_nulls);
    default: problem = "the dataset layout was not detected"; return false;
  }
}

bool RowFormat::chat_document(const ordered_json& row, Document& out, std::string& problem, bool drop_nulls) const {
  ordered_json messages = ordered_json::array();
  std::string system;
  if (!optional_string(row, "system", system)) {
    problem = "field \"system\" is not a string";
    return false;
  }
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  if (kind_ == Kind::alpaca) {
    std::string instruction, input, output;
    if (!optional_string(row, "instruction", instruction) || !optional_string(row, "input", input) ||
        !optional_string(row, "output", output) || !row.contains("instruction") || !row.contains("output") ||
        row["instruction"].is_null() || row["output"].is_null()) {
      problem = "an Alpaca row needs string fields \"instruction\" and \"output\" (and \"input\", \"system\" strings "
                "when present)";
      return false;
    }
    const auto history = row.find("history");
    if (history != row.end() && !history->is_null()) {
      bool ok = history->is_array();
      for (size_t i = 0; ok && i < history->size(); ++i) {
        const ordered_json& turn = (*history)[i];
        ok = turn.is_array() && turn.size() == 2 && turn[0].is_string() && turn[1].is_string();
        if (ok) {
          messages.push_back({{"role", "user"}, {"content", turn[0]}});
          messages.push_back({{"role", "assistant"}, {"content", turn[1]}});
        }
      }
      if (!ok) {
        problem = "\"history\" must be a list of [user, assistant] string pairs";
        return false;
      }
    }
    messages.push_back({{"role", "user"}, {"content", input.empty() ? instruction : instruction + "\n" + input}});
    messages.push_back({{"role", "assistant"}, {"content", output}});
  } else {
    const auto list = row.find(messages_field_);
    if (list == row.end()) {
      std::vector<std::string> keys;
      for (const auto& [k, v] : row.items()) keys.push_back(k);
      problem = str("no field \"", messages_field_, "\" (the row's fields are ", joined(keys), ")");
      return false;
    }
    if (!list->is_array()) {
      problem = str("\"", messages_field_, "\" must be a list of {role, content}, got a JSON ", list->type_name());
      return false;
    }
    for (size_t i = 0; i < list->size(); ++i) {
      const ordered_json& m = (*list)[i];
      if (!m.is_object()) {
        problem = str(messages_field_, "[", i, "] must be an object, got a JSON ", m.type_name());
        return false;
      }
      auto pick = [&](const std::string& configured, std::initializer_list<const char*> names) -> std::string {
        if (!configured.empty()) return configured;
        for (const char* n : names) {
          if (m.contains(n)) return n;
        }
        return *names.begin();
      };
      const std::string role_key = pick(role_key_, {"role", "from"});
      const std::string content_key = pick(content_key_, {"content", "value", "text"});
      const auto role = m.find(role_key);
      if (role == m.end() || !role->is_string()) {
        problem = str(messages_field_, "[", i, "] has no string \"", role_key, "\" (set training.chat_role_key to the "
                      "key holding the role)");
        return false;
      }
      const std::string mapped = map_role(role->get<std::string>());
      if (mapped.empty()) {
        problem = str(messages_field_, "[", i, "] has the unknown role \"", role->get<std::string>(), "\" (map it with "
                      "training.chat_role_map, e.g. ", role->get<std::string>(), "=assistant)");
        return false;
      }
      const auto content = m.find(content_key);
      if (content == m.end() || content->is_null()) {
        problem = str(messages_field_, "[", i, "] (", mapped, ") has no \"", content_key, "\" (set training.chat_content_key "
                      "to the key holding the text)");
        return false;
      }
      // The message as it is (tool_calls, reasoning_content, ... kept in their order), nulls dropped,
      // its role and content under the template's keys.
      ordered_json msg = ordered_json::object();
      for (const auto& [k, v] : m.items()) {
        if (v.is_null() && drop_nulls && k != role_key && k != content_key) continue;
        if (k == role_key) {
          msg["role"] = mapped;
        } else if (k == content_key) {
          msg["content"] = v;
        } else if (k != "role" && k != "content") {
          msg[k] = v;
        }
      }
      // A leading system message of the list comes after a top-level "system": keep one, the list's.
      if (i == 0 && mapped == "system" && !system.empty()) messages.erase(0);
      messages.push_back(std::move(msg));
    }
  }
  problem = check_messages(messages);
  if (!problem.empty()) return false;
  out.messages = std::move(messages);
  return true;
}

bool RowFormat::tokens_document(const ordered_json& row, Document& out, std::string& problem) const {
  const auto ids = row.find("input_ids");
  if (ids == row.end() || !ids->is_array()) {
    problem = "a pretokenized row needs a list \"input_ids\"";
    return false;
  }
  out.ids.clear();
  out.mask.clear();
  for (const ordered_json& v : *ids) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
      problem = str("\"input_ids\" holds ", v.dump(), "; expected non-negative integer token ids");
      return false;
    }
    out.ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
  }
  const auto labels = row.find("labels");
  if (labels == row.end() || labels->is_null()) return true;
  if (!labels->is_array() || labels->size() != ids->size()) {
    problem = str("\"labels\" must be a list as long as \"input_ids\" (", ids->size(), ")");
    return false;
  }
  for (size_t i = 0; i < labels->size(); ++i) {
    const ordered_json& v = (*labels)[i];
    const bool ignored = v.is_number_integer() && v.get<int64_t>() == -100;
    if (!ignored && !(v.is_number_integer() && v.get<int64_t>() == out.ids[i])) {
      problem = str("labels[", i, "] is ", v.dump(), ", neither -100 nor input_ids[", i, "] (", out.ids[i], "): titan "
                    "trains on the next token, masked by -100");
      return false;
    }
    out.mask.push_back(ignored ? 0 : 1);
  }
  return true;
}

}  // namespace titan::data
