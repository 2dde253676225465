// Pre-tokenization: splitting normalized text into the pieces that BPE encodes one by one, as HF
// tokenizers' Split (every behavior, invert), Digits, ByteLevel, Metaspace, Whitespace,
// WhitespaceSplit and Punctuation pre-tokenizers do.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "titan/data/tokenizer/json_reader.h"

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

// Rewrites Oniguruma's \s / \S / \w / \W into classes PCRE2 reads the same way (exposed for tests).
std::string onig_to_pcre2(std::string_view pattern, const std::string& where);

// HF's SplitDelimiterBehavior: what becomes of a match and the text around it.
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };

struct PreTokenizeStep {
  // split_isolated: a Split (any behavior; the name predates the others), and also Whitespace,
  // WhitespaceSplit and Punctuation, which are splits on a fixed pattern.
  enum class Kind { split_isolated, digits, byte_level, metaspace };
  Kind kind = Kind::split_isolated;
  std::shared_ptr<const Regex> regex;  // split_isolated; byte_level when use_regex
  SplitBehavior behavior = SplitBehavior::isolated;  // split_isolated
  bool invert = false;                 // split_isolated: the pieces between matches are the matches
  bool individual_digits = false;      // digits
  bool add_prefix_space = false;       // byte_level
  std::string replacement;             // metaspace: the character that stands for ' ' (UTF-8)
  enum class Prepend { always, first, never };
  Prepend prepend = Prepend::always;   // metaspace
  bool split = true;                   // metaspace: split before each replacement character
};

// A Metaspace node's prepend_scheme (always / first / never, default always) as HF reads it, with
// the older add_prefix_space (false requires "never") and str_rep (ignored) fields.
std::string read_metaspace_scheme(const JsonReader& r, const nlohmann::json& node, const std::string& path);

// Reads tokenizer.json's "pre_tokenizer" node at `path` into `steps` (Sequence flattened).
void read_pre_tokenizer(const JsonReader& r, const nlohmann::json& node, const std::string& path,
                        std::vector<PreTokenizeStep>& steps);

// GPT-2's pre-tokenizer regex, which ByteLevel applies when use_regex is true.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Applies the steps in order to `text`; each step splits every piece from the step before.
// Empty pieces are dropped (as HF does). Pieces view `text` or strings kept in `arena`.
// `at_origin`: `text` starts at offset 0 of the input (Metaspace's prepend_scheme "first").
void pre_tokenize(const std::vector<PreTokenizeStep>& steps, std::string_view text,
                  std::deque<std::string>& arena, std::vector<std::string_view>& out, bool at_origin = true);

}  // namespace titan::data
