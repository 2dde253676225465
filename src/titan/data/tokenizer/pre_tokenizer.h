// Pre-tokenization: splitting normalized text into the pieces that BPE encodes one by one, as HF
// tokenizers' Split (Isolated), Digits and ByteLevel pre-tokenizers do.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct pcre2_real_code_8;

namespace titan::data {

// A regex with Oniguruma's semantics (HF tokenizers' engine) on PCRE2 (UTF + UCP, JIT). The one
// rewrite: \s and \S become explicit classes of the Unicode White_Space characters, which is
// Oniguruma's \s; PCRE2's own \s adds U+180E (Mongolian vowel separator).
class Regex {
 public:
  // `literal` matches the pattern text as is (Split's {"String": ...}). `where` names it in errors.
  Regex(std::string_view pattern, bool literal, const std::string& where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends the [begin, end) byte ranges of the non-empty, non-overlapping matches in `text`
  // (valid UTF-8), left to right.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  pcre2_real_code_8* code_ = nullptr;
};

// Rewrites Oniguruma's \s / \S into classes PCRE2 reads the same way (exposed for tests).
std::string onig_to_pcre2(std::string_view pattern, const std::string& where);

struct PreTokenizeStep {
  enum class Kind { split_isolated, digits, byte_level };
  Kind kind = Kind::split_isolated;
  std::shared_ptr<const Regex> regex;  // split_isolated; byte_level when use_regex
  bool individual_digits = false;      // digits
  bool add_prefix_space = false;       // byte_level
};

// GPT-2's pre-tokenizer regex, which ByteLevel applies when use_regex is true.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Applies the steps in order to `text`; each step splits every piece from the step before.
// Empty pieces are dropped (as HF does). Pieces view `text` or strings kept in `arena`.
void pre_tokenize(const std::vector<PreTokenizeStep>& steps, std::string_view text,
                  std::deque<std::string>& arena, std::vector<std::string_view>& out);

}  // namespace titan::data
