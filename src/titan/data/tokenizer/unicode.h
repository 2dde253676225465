// UTF-8 and Unicode helpers for the tokenizer: validation, NFC, character classes as Rust's
// `char` methods define them (HF tokenizers is Rust), and GPT-2's byte <-> unicode mapping.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace titan::data {

// Byte offset of the first invalid UTF-8 sequence in `text`, or text.size() when it is valid
// (overlong forms, surrogates and code points past U+10FFFF are invalid, as in Rust's str).
size_t utf8_invalid_offset(std::string_view text);

// Decodes the code point starting at text[i] (text must be valid UTF-8); sets `len` to its bytes.
char32_t utf8_decode(std::string_view text, size_t i, int& len);
void utf8_append(std::string& out, char32_t cp);
// True when `text` is exactly one valid UTF-8 character.
bool is_one_char(std::string_view text);

// NFC of valid UTF-8 (utf8proc); ASCII-only text is returned unchanged without a copy.
std::string nfc(std::string_view text);
enum class UnicodeForm { nfc, nfd, nfkc, nfkd };
std::string unicode_normalize(std::string_view text, UnicodeForm form);
// Rust's char::to_lowercase on every character (HF's Lowercase normalizer): the simple mapping
// plus the one unconditional multi-character one, U+0130 -> "i\u0307".
std::string lowercase(std::string_view text);

// Rust's char::is_whitespace (the Unicode White_Space property), char::is_numeric (Nd, Nl, No)
// and char::is_alphanumeric (Alphabetic or Numeric, approximated by the L* and N* categories).
bool is_whitespace(char32_t cp);
bool is_numeric(char32_t cp);
bool is_word_char(char32_t cp);  // alphanumeric or '_', as HF's single_word check

// GPT-2's bytes_to_unicode: every byte maps to a printable code point (printable Latin-1 bytes to
// themselves, the rest to U+0100 + n), so a BPE vocabulary can hold any byte string as text.
struct ByteLevelMap {
  std::array<std::string, 256> byte_to_utf8;  // byte -> that code point in UTF-8
  std::array<char32_t, 256> byte_to_cp{};
  // Code point -> byte for the 256 mapped code points (all below U+0200), -1 elsewhere.
  std::array<int16_t, 512> cp_to_byte{};
  ByteLevelMap();
};
const ByteLevelMap& byte_level_map();

}  // namespace titan::data
