// tokenizer.json "normalizer": text -> text before pre-tokenization, as HF tokenizers' normalizers
// (ids only; titan keeps no offsets). Supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, Prepend,
// Replace (String or Regex), Sequence of these. Anything else is refused by name.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "titan/data/tokenizer/json_reader.h"
#include "titan/data/tokenizer/pre_tokenizer.h"

namespace titan::data {

struct NormalizeStep {
  enum class Kind { nfc, nfd, nfkc, nfkd, lowercase, strip, prepend, replace };
  Kind kind = Kind::nfc;
  bool strip_left = false;   // strip
  bool strip_right = false;  // strip
  std::string text;          // prepend: the prefix; replace: the replacement
  std::shared_ptr<const Regex> pattern;  // replace
};

class Normalizer {
 public:
  // `node` may be null (no normalizer).
  static Normalizer read(const JsonReader& r, const nlohmann::json* node);
  bool empty() const { return steps_.empty(); }
  std::string apply(std::string_view text) const;

 private:
  std::vector<NormalizeStep> steps_;
};

}  // namespace titan::data
