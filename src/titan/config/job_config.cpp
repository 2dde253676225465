#include "titan/config/job_config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <system_error>

#include "titan/config/value_text.h"
#include "titan/core/abbreviate.h"

namespace titan::config {

namespace {

template <class T>
constexpr FieldType field_type_of() {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, bool>) {
    return FieldType::boolean;
  } else if constexpr (std::is_same_v<U, int64_t>) {
    return FieldType::integer;
  } else if constexpr (std::is_same_v<U, double>) {
    return FieldType::number;
  } else {
    static_assert(std::is_same_v<U, std::string>, "config fields are bool, int64_t, double or std::string");
    return FieldType::string;
  }
}

template <class T>
std::string value_to_text(const T& value) {
  if constexpr (std::is_same_v<T, bool>) {
    return value ? "true" : "false";
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return std::to_string(value);
  } else if constexpr (std::is_same_v<T, double>) {
    return format_double(value);
  } else {
    return value;
  }
}

std::string last_component(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

}  // namespace

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string format_double(double value) {
  // Shortest text that parses back to the same double (std::to_chars without a precision).
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

std::optional<bool> parse_bool(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (lower == "true" || lower == "1" || lower == "yes") return true;
  if (lower == "false" || lower == "0" || lower == "no") return false;
  return std::nullopt;
}

std::optional<int64_t> parse_int(const std::string& text) {
  // from_chars rejects a leading '+'; accept it as a courtesy ("+3"), but not "+-3".
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (begin != end && *begin == '+' && end - begin > 1 && begin[1] != '-') ++begin;
  int64_t value = 0;
  const auto result = std::from_chars(begin, end, value);
  if (result.ec != std::errc() || result.ptr != end || begin == end) return std::nullopt;
  return value;
}

std::optional<double> parse_double(const std::string& text) {
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  if (begin != end && *begin == '+' && end - begin > 1 && begin[1] != '-') ++begin;
  double value = 0;
  const auto result = std::from_chars(begin, end, value);
  if (result.ec != std::errc() || result.ptr != end || begin == end) return std::nullopt;
  return value;
}

const char* field_type_name(FieldType type) {
  switch (type) {
    case FieldType::boolean: return "boolean";
    case FieldType::integer: return "integer";
    case FieldType::number: return "number";
    case FieldType::string: return "string";
  }
  return "?";
}

const std::vector<Field>& job_config_fields() {
  static const std::vector<Field> fields = [] {
    std::vector<Field> out;
    const JobConfig defaults;
    visit_fields(defaults, [&](const char* path, const auto& value, const char* help) {
      out.push_back(Field{path, field_type_of<decltype(value)>(), help, value_to_text(value)});
    });
    return out;
  }();
  return fields;
}

const Field* find_field(const std::string& path) {
  for (const Field& field : job_config_fields()) {
    if (field.path == path) return &field;
  }
  return nullptr;
}

std::string nearest_field(const std::string& path) {
  const std::string query_last = last_component(path);
  const bool query_has_section = query_last.size() != path.size();
  std::string best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (const Field& field : job_config_fields()) {
    const std::string field_last = last_component(field.path);
    // Matching the key alone costs 1 when the query named a (wrong) section: "train.lr".
    size_t key_distance = edit_distance(query_last, field_last);
    if (query_last.size() >= 3 && field_last.starts_with(query_last)) key_distance = std::min<size_t>(key_distance, 1);
    const size_t distance = std::min(edit_distance(path, field.path), key_distance + (query_has_section ? 1 : 0));
    if (distance < best_distance) {
      best_distance = distance;
      best = field.path;
    }
  }
  const size_t limit = std::max<size_t>(2, (query_last.size() + 1) / 2);
  return best_distance <= limit ? best : std::string();
}

std::string unknown_field_message(const std::string& path, const std::string& prefix, const std::string& tail) {
  // Fields that were replaced: the message names the new one (one message, no silent alias).
  if (path == "training.dtype") {
    return str("config field '", prefix, path, "' was replaced by ", prefix,
               "training.mixed_precision_param (float32 | bfloat16, torchtitan's name)");
  }
  const std::string nearest = nearest_field(path);
  std::string message = str("unknown config field '", prefix, abbreviate(path), "'");
  if (!nearest.empty()) return message + str("; did you mean ", prefix, nearest, "?") + tail;
  return message + (tail.empty() ? std::string("; titan train --help lists every field") : tail);
}

std::string get_field(const JobConfig& config, const std::string& path) {
  std::optional<std::string> text;
  visit_fields(config, [&](const char* field_path, const auto& value, const char*) {
    if (path == field_path) text = value_to_text(value);
  });
  if (!text) config_fail(unknown_field_message(path, "", ""));
  return *text;
}

void set_field(JobConfig& config, const std::string& path, const std::string& text) {
  bool found = false;
  visit_fields(config, [&](const char* field_path, auto& value, const char*) {
    if (path != field_path) return;
    found = true;
    using T = std::remove_cvref_t<decltype(value)>;
    if constexpr (std::is_same_v<T, bool>) {
      const auto parsed = parse_bool(text);
      if (!parsed) config_fail(path, ": '", text, "' is not a boolean; use true/false, 1/0 or yes/no");
      value = *parsed;
    } else if constexpr (std::is_same_v<T, int64_t>) {
      const auto parsed = parse_int(text);
      const size_t sign = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
      const bool digits = text.size() > sign && text.find_first_not_of("0123456789", sign) == std::string::npos;
      if (!parsed && digits) {
        config_fail(path, ": '", text, "' is out of range for a 64-bit integer (at most 9223372036854775807 in size)");
      }
      if (!parsed) config_fail(path, ": '", text, "' is not an integer; use a whole number such as 10 or -1");
      value = *parsed;
    } else if constexpr (std::is_same_v<T, double>) {
      const auto parsed = parse_double(text);
      if (!parsed) {
        char* end = nullptr;
        errno = 0;
        (void)std::strtod(text.c_str(), &end);
        if (errno == ERANGE && end == text.c_str() + text.size() && !text.empty()) {
          config_fail(path, ": '", text, "' is out of range for a double (at most ~1.8e308 in size)");
        }
        config_fail(path, ": '", text, "' is not a number; use e.g. 0.5, 8e-4 or 1");
      }
      if (!std::isfinite(*parsed)) config_fail(path, ": '", text, "' is not a finite number; use e.g. 0.5, 8e-4 or 1");
      value = *parsed;
    } else {
      value = text;
    }
  });
  if (!found) config_fail(unknown_field_message(path, "", ""));
}

}  // namespace titan::config
