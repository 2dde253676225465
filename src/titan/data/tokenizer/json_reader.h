// Reads tokenizer.json fields with one-line errors that name the file and the JSON path
// ("[tokenizer] <file>: <path> <what>"). Shared by the component readers (normalizer,
// pre-tokenizer, model, post-processor, decoder); internal to the tokenizer.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>

#include "titan/core/error.h"

namespace titan::data {

class JsonReader {
 public:
  using json = nlohmann::json;
  explicit JsonReader(std::string where) : where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    TITAN_FAIL("[tokenizer] ", where_, ": ", path, " ", what);
  }

  const json& member(const json& obj, const std::string& path, const char* key) const {
    if (!obj.is_object()) fail(path, "must be an object");
    const auto it = obj.find(key);
    if (it == obj.end()) fail(join(path, key), "is missing");
    return *it;
  }
  const json* optional(const json& obj, const char* key) const {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  std::string string(const json& obj, const std::string& path, const char* key) const {
    const json& v = member(obj, path, key);
    if (!v.is_string()) fail(join(path, key), "must be a string");
    return v.get<std::string>();
  }
  bool boolean(const json& obj, const std::string& path, const char* key, bool fallback) const {
    const json* v = optional(obj, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(join(path, key), "must be true or false");
    return v->get<bool>();
  }
  int64_t integer(const json& obj, const std::string& path, const char* key, int64_t lo, int64_t hi) const {
    const json& v = member(obj, path, key);
    if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      fail(join(path, key), str("must be an integer in [", lo, ", ", hi, "]"));
    }
    return v.get<int64_t>();
  }
  // A {"String": "..."} or {"Regex": "..."} pattern (Split, Replace); sets `is_regex`.
  std::string pattern(const json& obj, const std::string& path, bool& is_regex) const {
    const json& p = member(obj, path, "pattern");
    if (!p.is_object() || p.size() != 1 || !p.begin()->is_string() ||
        (p.begin().key() != "Regex" && p.begin().key() != "String")) {
      fail(path + ".pattern", "must be {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    }
    is_regex = p.begin().key() == "Regex";
    return p.begin()->get<std::string>();
  }
  // Rejects keys this reader does not know: an unknown option would otherwise be ignored silently.
  void only_keys(const json& obj, const std::string& path, std::initializer_list<const char*> keys) const {
    if (!obj.is_object()) fail(path.empty() ? "(top level)" : path, "must be an object");
    for (const auto& item : obj.items()) {
      const bool known = std::any_of(keys.begin(), keys.end(), [&](const char* k) { return item.key() == k; });
      if (!known) fail(join(path, item.key()), "is not supported. HINT: titan reads only the fields it implements");
    }
  }
  [[noreturn]] void unsupported_type(const std::string& path, const std::string& type) const {
    fail(path + ".type", str("\"", type, "\" is not supported. HINT: the README lists the tokenizer.json "
                                         "components titan implements"));
  }
  const std::string& where() const { return where_; }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

 private:
  std::string where_;
};

}  // namespace titan::data
