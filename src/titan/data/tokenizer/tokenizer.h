// A Hugging Face-exact byte-level BPE tokenizer loaded from tokenizer.json (Qwen3, GPT-2 layouts).
//
// encode runs what HF tokenizers runs, without adding special tokens:
//   1. added tokens that are not "normalized" are found in the raw text (leftmost, longest);
//   2. the text between them is normalized (NFC or nothing), then "normalized" added tokens are found;
//   3. the rest is pre-tokenized (Split regex / Digits / ByteLevel) into pieces;
//   4. each piece's bytes go through GPT-2's byte map and BPE merges.
// decode maps ids back to bytes: added tokens as their content, BPE tokens through the inverse byte
// map. It returns the raw bytes: where HF's decode replaces an invalid UTF-8 sequence (ids that cut a
// character) with U+FFFD, this keeps the bytes, so decoding a stream in pieces loses nothing.
//
// Whatever in tokenizer.json this does not implement is an error naming the JSON path, never a
// silent fallback. encode and decode are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace titan::data {

class Tokenizer {
 public:
  // `path_or_dir`: a tokenizer.json file, or a folder holding one.
  static Tokenizer from_file(const std::string& path_or_dir);
  // The content of a tokenizer.json; `where` names it in errors.
  static Tokenizer from_json_text(std::string_view json_text, const std::string& where);

  // Ids of `text` (valid UTF-8, may contain NUL); throws titan::Error for invalid UTF-8.
  std::vector<int32_t> encode(std::string_view text) const;
  // Bytes of `ids`. An id the tokenizer does not know (a model's vocabulary is often padded past
  // the tokenizer's: Qwen3's ids 151,669..151,935) is skipped, as HF's decode skips it, and counted
  // in `*skipped` when given.
  std::string decode(std::span<const int32_t> ids, int64_t* skipped = nullptr) const;

  // One past the largest id (BPE vocabulary and added tokens): 151,669 for Qwen3.
  int64_t vocab_size() const;
  // The id of a token as written in tokenizer.json (byte-level text, or an added token's content).
  std::optional<int32_t> token_id(std::string_view token) const;

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace titan::data
