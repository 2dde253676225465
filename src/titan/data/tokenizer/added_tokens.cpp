#include "titan/data/tokenizer/added_tokens.h"

#include <algorithm>

#include "titan/data/tokenizer/unicode.h"

namespace titan::data {
namespace {

char32_t last_char(std::string_view text) {
  size_t i = text.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  int len = 0;
  return utf8_decode(text, i, len);
}

char32_t first_char(std::string_view text) {
  int len = 0;
  return utf8_decode(text, 0, len);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) continue;
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(i);
  }
  for (auto& list : by_first_byte_) {
    std::stable_sort(list.begin(), list.end(), [&](uint32_t a, uint32_t b) {
      return tokens_[a].content.size() > tokens_[b].content.size();
    });
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  size_t start_offset = 0;  // end of the last emitted token
  size_t pos = 0;           // where the matcher resumes
  while (pos < text.size()) {
    const auto& candidates = by_first_byte_[static_cast<unsigned char>(text[pos])];
    const AddedToken* found = nullptr;
    for (const uint32_t index : candidates) {
      const std::string& content = tokens_[index].content;
      if (text.compare(pos, content.size(), content) == 0) {
        found = &tokens_[index];
        break;
      }
    }
    if (found == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + found->content.size();
    pos = stop;  // HF's matcher moves past a match even when the flags below discard it
    if (found->single_word) {
      const bool start_space = start == 0 || !is_word_char(last_char(text.substr(0, start)));
      const bool stop_space = stop == text.size() || !is_word_char(first_char(text.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (found->lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        size_t i = new_start - 1;
        while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
        int len = 0;
        if (!is_whitespace(utf8_decode(text, i, len))) break;
        new_start = i;
      }
      start = std::max(new_start, start_offset);
    }
    if (found->rstrip) {
      while (stop < text.size()) {
        int len = 0;
        if (!is_whitespace(utf8_decode(text, stop, len))) break;
        stop += static_cast<size_t>(len);
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, found->id});
    start_offset = stop;
    pos = std::max(pos, stop);
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace titan::data
