// tokenizer.json "decoder": token strings -> text, as HF tokenizers' decoders: ByteLevel,
// Metaspace, ByteFallback, Fuse, Strip, Replace (String patterns) and Sequence of these.
//
// One difference, on purpose: where HF turns bytes that are not valid UTF-8 into U+FFFD (ByteLevel:
// per invalid sequence; ByteFallback: one per byte of the group), this keeps the bytes, so that a
// stream decoded in pieces loses nothing. Ids from encode always decode to valid UTF-8, and there
// the two agree exactly.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "titan/data/tokenizer/json_reader.h"

namespace titan::data {

struct DecodeStep {
  enum class Kind { byte_level, metaspace, byte_fallback, fuse, strip, replace };
  Kind kind = Kind::byte_level;
  std::string text;         // metaspace: replacement; strip: content; replace: pattern
  std::string content;      // replace: the replacement
  bool prepend_never = false;  // metaspace: prepend_scheme "never" keeps the first token's replacement
  size_t start = 0;         // strip: characters to cut from the left
  size_t stop = 0;          // strip: characters to cut from the right
};

class Decoder {
 public:
  // `node` may be null ("decoder": null): decode then joins the token strings with spaces, as HF
  // tokenizers does without a decoder.
  static Decoder read(const JsonReader& r, const nlohmann::json* node);
  bool empty() const { return steps_.empty(); }
  // True when the chain is exactly ByteLevel: each token then decodes on its own.
  bool byte_level_only() const { return steps_.size() == 1 && steps_[0].kind == DecodeStep::Kind::byte_level; }
  std::string decode(std::vector<std::string> tokens) const;

 private:
  std::vector<DecodeStep> steps_;
  bool none_ = false;  // "decoder": null
};

// HF's ByteLevel decoding of one token: each character back to its byte; a token with a character
// outside GPT-2's byte map is kept as its own UTF-8 bytes.
std::string byte_level_decode(std::string_view token);

}  // namespace titan::data
