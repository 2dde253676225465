// Added tokens (tokenizer.json "added_tokens"): found in the text before the model sees it,
// leftmost-longest as HF's Aho-Corasick matcher does, with the lstrip / rstrip / single_word flags.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace titan::data {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// One segment of a split: a text range to encode further, or an added token's id.
struct Segment {
  size_t begin = 0;
  size_t end = 0;
  int32_t id = -1;  // -1: text
};

// Matches a set of token strings (the non-normalized ones on raw text, or the normalized ones,
// whose contents the caller normalized, on normalized text).
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  bool empty() const { return tokens_.empty(); }

  // Splits `text` (valid UTF-8) into text and token segments covering it; empty text segments are
  // left out.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  std::vector<AddedToken> tokens_;
  std::array<std::vector<uint32_t>, 256> by_first_byte_;  // token indices, longest first
};

}  // namespace titan::data
