#include "titan/core/nesting.h"

#include <algorithm>
#include <cstdint>

#include "titan/core/error.h"

namespace titan {

size_t json_too_deep_at(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character, whatever it is, never closes the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonNesting) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

void check_json_nesting(std::string_view text, const std::string& where) {
  const size_t at = json_too_deep_at(text);
  if (at == std::string_view::npos) return;
  const int64_t line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  TITAN_FAIL(where, ": nested more than ", kMaxJsonNesting, " levels deep (arrays/objects) at line ", line,
             ". HINT: no model, tokenizer or data file nests this deep; the file is damaged or not what it claims "
             "to be");
}

void check_toml_key_parts(std::string_view text, const std::string& where) {
  // A key or header segment starts at a line's start, '{' or ','; its dots are counted up to the
  // '=' (a key) or ']' (a header) that ends it. A value's dots (1.5) are dropped at the ',', '}' or
  // line end that ends the value. Quoted text (keys, values, """ strings) counts nothing.
  int64_t line = 1;
  int parts = 1;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (quote != 0) {
      if (c == '\\' && quote == '"') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
      continue;
    }
    switch (c) {
      case '"':
      case '\'': quote = c; break;
      case '.': ++parts; break;
      case '#':
        while (i + 1 < text.size() && text[i + 1] != '\n') ++i;
        break;
      case '=':
      case ']':
        TITAN_CHECK(parts <= kMaxTomlKeyParts, where, ":", line, ": a table header or key of ", parts,
                    " dotted parts (at most ", kMaxTomlKeyParts,
                    "). HINT: a job file needs two: [section] and field = value (titan train --print-config "
                    "writes one)");
        parts = 1;
        break;
      case '\n':
      case '{':
      case ',':
      case '}': parts = 1; break;
      default: break;
    }
  }
}

}  // namespace titan
