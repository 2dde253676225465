#include "titan/data/tokenizer/post_processor.h"

#include <map>

namespace titan::data {
namespace {

using nlohmann::json;

// A template is a list of {"SpecialToken": {"id", "type_id"}} and {"Sequence": {"id": "A"|"B",
// "type_id"}} pieces. Returns the ids around sequence A; `pair` requires both A and B once each.
SequenceSpecials read_template(const JsonReader& r, const json& list, const std::string& path,
                               const std::map<std::string, std::vector<int32_t>>& specials, bool pair) {
  if (!list.is_array()) r.fail(path, "must be an array of {\"SpecialToken\"} / {\"Sequence\"} pieces");
  SequenceSpecials out;
  int seen_a = 0;
  int seen_b = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& piece = list[i];
    const std::string at = str(path, "[", i, "]");
    if (!piece.is_object() || piece.size() != 1) r.fail(at, "must be {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    const std::string kind = piece.begin().key();
    const json& body = *piece.begin();
    const std::string body_path = at + "." + kind;
    r.only_keys(body, body_path, {"id", "type_id"});
    r.integer(body, body_path, "type_id", 0, INT32_MAX);  // type ids matter to BERT-style models only
    const std::string id = r.string(body, body_path, "id");
    if (kind == "Sequence") {
      if (id == "A") {
        ++seen_a;
      } else if (id == "B" && pair) {
        ++seen_b;
      } else {
        r.fail(body_path + ".id", str("\"", id, "\" must be ", pair ? "\"A\" or \"B\"" : "\"A\""));
      }
    } else if (kind == "SpecialToken") {
      const auto it = specials.find(id);
      if (it == specials.end()) r.fail(body_path + ".id", str("\"", id, "\" is not in post_processor.special_tokens"));
      if (!pair) {
        std::vector<int32_t>& side = seen_a == 0 ? out.prefix : out.suffix;
        side.insert(side.end(), it->second.begin(), it->second.end());
      }
    } else {
      r.fail(at, str("\"", kind, "\" is not supported (only SpecialToken and Sequence)"));
    }
  }
  if (seen_a != 1 || seen_b != (pair ? 1 : 0)) {
    r.fail(path, pair ? "must name sequence A once and sequence B once" : "must name sequence A once");
  }
  return out;
}

SequenceSpecials read_template_processing(const JsonReader& r, const json& node, const std::string& path) {
  r.only_keys(node, path, {"type", "single", "pair", "special_tokens"});
  std::map<std::string, std::vector<int32_t>> specials;
  if (const json* map = r.optional(node, "special_tokens")) {
    if (!map->is_object()) r.fail(path + ".special_tokens", "must be an object");
    for (const auto& item : map->items()) {
      const std::string at = str(path, ".special_tokens[\"", item.key(), "\"]");
      r.only_keys(item.value(), at, {"id", "ids", "tokens"});
      if (r.string(item.value(), at, "id") != item.key()) r.fail(at + ".id", "must equal its key");
      const json& ids = r.member(item.value(), at, "ids");
      const json& tokens = r.member(item.value(), at, "tokens");
      if (!ids.is_array() || !tokens.is_array() || ids.size() != tokens.size() || ids.empty()) {
        r.fail(at, "must hold \"ids\" and \"tokens\" arrays of one equal, non-zero length");
      }
      std::vector<int32_t>& out = specials[item.key()];
      for (const json& id : ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
          r.fail(at + ".ids", "must hold ids in [0, 2^31)");
        }
        out.push_back(static_cast<int32_t>(id.get<int64_t>()));
      }
    }
  }
  const SequenceSpecials single = read_template(r, r.member(node, path, "single"), path + ".single", specials, false);
  if (const json* pair = r.optional(node, "pair")) read_template(r, *pair, path + ".pair", specials, true);
  return single;
}

void read_node(const JsonReader& r, const json& node, const std::string& path, SequenceSpecials& out,
               int& templates) {
  const std::string type = r.string(node, path, "type");
  if (type == "ByteLevel") {
    // add_prefix_space / trim_offsets / use_regex change offsets only, never ids.
    r.only_keys(node, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
  } else if (type == "TemplateProcessing") {
    // Two templates in one Sequence would nest; no published tokenizer does that.
    if (++templates > 1) r.fail(path, "is a second TemplateProcessing; only one is supported");
    out = read_template_processing(r, node, path);
  } else if (type == "Sequence") {
    r.only_keys(node, path, {"type", "processors"});
    const json& list = r.member(node, path, "processors");
    if (!list.is_array()) r.fail(path + ".processors", "must be an array");
    for (size_t i = 0; i < list.size(); ++i) read_node(r, list[i], str(path, ".processors[", i, "]"), out, templates);
  } else {
    r.unsupported_type(path, type);
  }
}

}  // namespace

SequenceSpecials read_post_processor(const JsonReader& r, const json* node) {
  SequenceSpecials out;
  if (node == nullptr) return out;
  int templates = 0;
  read_node(r, *node, "post_processor", out, templates);
  return out;
}

}  // namespace titan::data
