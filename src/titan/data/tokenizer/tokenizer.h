// A Hugging Face-exact BPE tokenizer loaded from tokenizer.json: byte-level layouts (Qwen3, GPT-2,
// Llama 3) and SentencePiece-converted ones (Llama 2, Mistral, Gemma: Metaspace, byte_fallback).
//
// encode runs what HF tokenizers runs:
//   1. added tokens that are not "normalized" are found in the raw text (leftmost, longest);
//   2. the text between them is normalized (normalizer.h), then "normalized" added tokens are found;
//   3. the rest is pre-tokenized (pre_tokenizer.h) into pieces;
//   4. each piece goes through BPE (bpe.h);
//   5. with add_special_tokens, the post-processor's tokens go around the sequence (post_processor.h).
// decode maps ids to token texts (added tokens as their content) and runs the decoder (decoder.h).
// It returns raw bytes: where HF's decode replaces invalid UTF-8 (ids that cut a character) with
// U+FFFD, this keeps the bytes, so decoding a stream in pieces loses nothing.
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
  // `add_special_tokens`: as HF's encode(add_special_tokens=True), the post-processor's tokens
  // around the sequence (special_prefix / special_suffix). Off by default: text from a chat
  // template already holds its special tokens.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  // The ids the post-processor puts before / after one sequence (empty for Qwen3; "<s>" or
  // "<|begin_of_text|>" before it for Llama 2 / Llama 3).
  const std::vector<int32_t>& special_prefix() const;
  const std::vector<int32_t>& special_suffix() const;
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
