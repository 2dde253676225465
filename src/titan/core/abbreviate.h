// A user's string inside an error line: a pasted megabyte must not become a megabyte of stderr.
#pragma once

#include <string>

#include "titan/core/error.h"

namespace titan {

// `text` whole up to max_chars bytes, else its first max_chars (never cutting a UTF-8 character)
// and "... (N bytes)".
inline std::string abbreviate(const std::string& text, size_t max_chars = 80) {
  if (text.size() <= max_chars) return text;
  size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // a continuation byte
  return str(text.substr(0, cut), "... (", text.size(), " bytes)");
}

}  // namespace titan
