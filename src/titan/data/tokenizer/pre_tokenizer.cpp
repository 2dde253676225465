#define PCRE2_CODE_UNIT_WIDTH 8
#include "titan/data/tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <algorithm>
#include <memory>

#include "titan/core/error.h"
#include "titan/data/tokenizer/unicode.h"

namespace titan::data {
namespace {

// Unicode White_Space, which Oniguruma's \s matches (and Rust's char::is_whitespace): the
// separator categories Zs/Zl/Zp (from PCRE2's Unicode tables) plus the controls TAB..CR and NEL.
// PCRE2's own \s also takes U+180E (Cf since Unicode 6.3), which Oniguruma does not.
constexpr std::string_view kWhiteSpaceClass = R"(\p{Zs}\p{Zl}\p{Zp}\t\n\x0B\f\r\x{85})";
// Oniguruma's Unicode \w: Letter, Mark, Number, Connector_Punctuation. PCRE2's (10.42) lacks Mark.
constexpr std::string_view kWordClass = R"(\p{L}\p{M}\p{N}\p{Pc})";

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

}  // namespace

std::string onig_to_pcre2(std::string_view pattern, const std::string& where) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[++i];
      if (e == 's') {
        if (in_class) {
          out += kWhiteSpaceClass;
        } else {
          out += '[';
          out += kWhiteSpaceClass;
          out += ']';
        }
      } else if (e == 'S') {
        TITAN_CHECK(!in_class, "[tokenizer] ", where, ": \\S inside a character class is not supported");
        out += "[^";
        out += kWhiteSpaceClass;
        out += ']';
      } else if (e == 'w') {
        out += in_class ? str(kWordClass) : str("[", kWordClass, "]");
      } else if (e == 'W') {
        TITAN_CHECK(!in_class, "[tokenizer] ", where, ": \\W inside a character class is not supported");
        out += str("[^", kWordClass, "]");
      } else if (e == 'h' || e == 'H') {
        // Oniguruma's \h is a hex digit, PCRE2's a horizontal space: refuse rather than guess.
        TITAN_FAIL("[tokenizer] ", where, ": \\", e, " is not supported (it differs between Oniguruma and PCRE2)");
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == '[' && in_class) {
      TITAN_FAIL("[tokenizer] ", where, ": nested character classes are not supported");
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

Regex::Regex(std::string_view pattern, bool literal, const std::string& where) {
  const std::string translated = literal ? std::string(pattern) : onig_to_pcre2(pattern, where);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2_LITERAL refuses PCRE2_UCP (which only changes classes, of which a literal has none).
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(), options,
                        &error, &offset, nullptr);
  TITAN_CHECK(code_ != nullptr, "[tokenizer] ", where, ": cannot compile regex at offset ", offset,
              ": ", pcre2_message(error));
  // JIT is only a speed-up; pcre2_match falls back to the interpreter when it is unavailable.
  pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);
}

Regex::~Regex() { pcre2_code_free(code_); }

void Regex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  if (text.empty()) return;
  struct MatchDataFree {
    void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
  };
  // One match data per thread: encode is const and may run on several threads at once.
  thread_local std::unique_ptr<pcre2_match_data, MatchDataFree> match(pcre2_match_data_create(4, nullptr));
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t offset = 0;
  while (offset < text.size()) {
    const int rc = pcre2_match(code_, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, match.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    TITAN_CHECK(rc >= 0, "[tokenizer] regex match failed: ", pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.get());
    const size_t begin = ov[0];
    const size_t end = ov[1];
    if (end > begin) {
      out.emplace_back(begin, end);
      offset = end;
    } else {
      // An empty match yields no piece; step one character on, as Oniguruma's iterator does.
      int len = 1;
      if (begin < text.size()) utf8_decode(text, begin, len);
      offset = begin + static_cast<size_t>(len);
    }
  }
}

namespace {

using nlohmann::json;

struct Range {
  size_t begin;
  size_t end;
  bool is_match;
};

// HF's NormalizedString::split: the matches and the gaps between them, flagged, then combined by
// `behavior` (the folds below are HF's, step for step); empty pieces are dropped.
void split_by(std::string_view piece, bool origin, const std::vector<std::pair<size_t, size_t>>& matches, bool invert,
              SplitBehavior behavior, std::vector<std::string_view>& out, std::vector<uint8_t>& out_origin) {
  std::vector<Range> ranges;
  size_t prev = 0;
  for (const auto& [begin, end] : matches) {
    if (begin > prev) ranges.push_back({prev, begin, invert});
    ranges.push_back({begin, end, !invert});
    prev = end;
  }
  if (prev < piece.size()) ranges.push_back({prev, piece.size(), invert});
  std::vector<Range> kept;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::removed:
      for (const Range& x : ranges) {
        if (!x.is_match) kept.push_back(x);
      }
      break;
    case SplitBehavior::isolated:
      kept = ranges;
      break;
    case SplitBehavior::merged_with_previous:
      for (const Range& x : ranges) {
        if (x.is_match && !previous_match && !kept.empty()) {
          kept.back().end = x.end;
        } else {
          kept.push_back(x);
        }
        previous_match = x.is_match;
      }
      break;
    case SplitBehavior::merged_with_next:
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
        if (it->is_match && !previous_match && !kept.empty()) {
          kept.back().begin = it->begin;
        } else {
          kept.push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    case SplitBehavior::contiguous:
      for (const Range& x : ranges) {
        if (x.is_match == previous_match && !kept.empty()) {
          kept.back().end = x.end;
        } else {
          kept.push_back(x);
        }
        previous_match = x.is_match;
      }
      break;
  }
  for (const Range& x : kept) {
    if (x.end == x.begin) continue;
    out.push_back(piece.substr(x.begin, x.end - x.begin));
    out_origin.push_back(origin && x.begin == 0 ? 1 : 0);
  }
}

// Digits: each numeric character alone (individual) or runs of numeric characters (contiguous);
// the text between them forms pieces too.
void split_digits(std::string_view piece, bool individual, std::vector<std::pair<size_t, size_t>>& matches) {
  size_t i = 0;
  while (i < piece.size()) {
    int len = 1;
    const bool numeric = is_numeric(utf8_decode(piece, i, len));
    if (numeric) {
      if (!individual && !matches.empty() && matches.back().second == i) {
        matches.back().second = i + static_cast<size_t>(len);
      } else {
        matches.emplace_back(i, i + static_cast<size_t>(len));
      }
    }
    i += static_cast<size_t>(len);
  }
}

// Metaspace: ' ' becomes the replacement, which is prepended by the scheme, and the piece is split
// before each replacement character (MergedWithNext).
void metaspace(const PreTokenizeStep& step, std::string_view piece, bool origin, std::deque<std::string>& arena,
               std::vector<std::pair<size_t, size_t>>& scratch, std::vector<std::string_view>& out,
               std::vector<uint8_t>& out_origin) {
  std::string& s = arena.emplace_back();
  const bool starts = piece.substr(0, step.replacement.size()) == step.replacement ||
                      (!piece.empty() && piece.front() == ' ');
  if (!starts && (step.prepend == PreTokenizeStep::Prepend::always ||
                  (step.prepend == PreTokenizeStep::Prepend::first && origin))) {
    s = step.replacement;
  }
  for (const char c : piece) {
    if (c == ' ') {
      s += step.replacement;
    } else {
      s += c;
    }
  }
  if (!step.split) {
    out.push_back(s);
    out_origin.push_back(origin ? 1 : 0);
    return;
  }
  scratch.clear();
  for (size_t at = s.find(step.replacement); at != std::string::npos; at = s.find(step.replacement, at + 1)) {
    scratch.emplace_back(at, at + step.replacement.size());
  }
  split_by(s, origin, scratch, false, SplitBehavior::merged_with_next, out, out_origin);
}

SplitBehavior read_behavior(const JsonReader& r, const json& node, const std::string& path, const char* fallback) {
  const json* v = r.optional(node, "behavior");
  const std::string b = v == nullptr ? fallback : v->is_string() ? v->get<std::string>() : "";
  if (b == "Removed") return SplitBehavior::removed;
  if (b == "Isolated") return SplitBehavior::isolated;
  if (b == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (b == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (b == "Contiguous") return SplitBehavior::contiguous;
  r.fail(path + ".behavior", str(v == nullptr ? "null" : v->dump(), " is not supported (Removed, Isolated, "
                                 "MergedWithPrevious, MergedWithNext or Contiguous)"));
}

PreTokenizeStep pattern_step(std::string_view pattern, SplitBehavior behavior, bool invert, const std::string& where) {
  PreTokenizeStep step;
  step.kind = PreTokenizeStep::Kind::split_isolated;
  step.regex = std::make_shared<const Regex>(pattern, false, where);
  step.behavior = behavior;
  step.invert = invert;
  return step;
}

}  // namespace

std::string read_metaspace_scheme(const JsonReader& r, const json& node, const std::string& path) {
  // Older files also carry add_prefix_space and str_rep; HF reads them as below.
  r.only_keys(node, path, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
  if (const json* s = r.optional(node, "str_rep"); s != nullptr && !s->is_string()) {
    r.fail(path + ".str_rep", "must be a string");  // HF ignores its value
  }
  const json* scheme_json = r.optional(node, "prepend_scheme");
  if (scheme_json != nullptr && !scheme_json->is_string()) r.fail(path + ".prepend_scheme", "must be a string");
  const std::string scheme = scheme_json ? scheme_json->get<std::string>() : "always";  // HF's default
  if (!r.boolean(node, path, "add_prefix_space", true) && scheme != "never") {
    r.fail(path + ".add_prefix_space", str("false does not match prepend_scheme \"", scheme, "\" (HF refuses it too)"));
  }
  return scheme;
}

void read_pre_tokenizer(const JsonReader& r, const json& node, const std::string& path,
                        std::vector<PreTokenizeStep>& steps) {
  const std::string type = r.string(node, path, "type");
  if (type == "Sequence") {
    r.only_keys(node, path, {"type", "pretokenizers"});
    const json& list = r.member(node, path, "pretokenizers");
    if (!list.is_array()) r.fail(path + ".pretokenizers", "must be an array");
    for (size_t i = 0; i < list.size(); ++i) {
      read_pre_tokenizer(r, list[i], str(path, ".pretokenizers[", i, "]"), steps);
    }
  } else if (type == "Split") {
    r.only_keys(node, path, {"type", "pattern", "behavior", "invert"});
    const SplitBehavior behavior = read_behavior(r, node, path, "");
    const bool invert = r.boolean(node, path, "invert", false);
    bool is_regex = false;
    const std::string pattern = r.pattern(node, path, is_regex);
    PreTokenizeStep step;
    step.kind = PreTokenizeStep::Kind::split_isolated;
    step.regex = std::make_shared<const Regex>(pattern, !is_regex, r.where() + ": " + path + ".pattern");
    step.behavior = behavior;
    step.invert = invert;
    steps.push_back(std::move(step));
  } else if (type == "Digits") {
    r.only_keys(node, path, {"type", "individual_digits"});
    PreTokenizeStep step;
    step.kind = PreTokenizeStep::Kind::digits;
    step.individual_digits = r.boolean(node, path, "individual_digits", false);
    steps.push_back(std::move(step));
  } else if (type == "ByteLevel") {
    r.only_keys(node, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    PreTokenizeStep step;
    step.kind = PreTokenizeStep::Kind::byte_level;
    step.add_prefix_space = r.boolean(node, path, "add_prefix_space", true);  // HF's defaults
    if (r.boolean(node, path, "use_regex", true)) {
      step.regex = std::make_shared<const Regex>(kGpt2Pattern, false, "GPT-2 pattern");
    }
    steps.push_back(std::move(step));
  } else if (type == "Metaspace") {
    PreTokenizeStep step;
    step.kind = PreTokenizeStep::Kind::metaspace;
    step.replacement = r.string(node, path, "replacement");
    if (!is_one_char(step.replacement)) r.fail(path + ".replacement", "must be one character");
    const std::string scheme = read_metaspace_scheme(r, node, path);
    if (scheme == "always") {
      step.prepend = PreTokenizeStep::Prepend::always;
    } else if (scheme == "first") {
      step.prepend = PreTokenizeStep::Prepend::first;
    } else if (scheme == "never") {
      step.prepend = PreTokenizeStep::Prepend::never;
    } else {
      r.fail(path + ".prepend_scheme", str("\"", scheme, "\" is not supported (always, first or never)"));
    }
    step.split = r.boolean(node, path, "split", true);
    steps.push_back(std::move(step));
  } else if (type == "Whitespace") {  // HF: \w+|[^\w\s]+, keeping the matches
    r.only_keys(node, path, {"type"});
    steps.push_back(pattern_step(R"(\w+|[^\w\s]+)", SplitBehavior::removed, true, "Whitespace pattern"));
  } else if (type == "WhitespaceSplit") {  // HF: split on char::is_whitespace, removing it
    r.only_keys(node, path, {"type"});
    steps.push_back(pattern_step(R"(\s)", SplitBehavior::removed, false, "WhitespaceSplit pattern"));
  } else if (type == "Punctuation") {  // HF: ASCII punctuation or Unicode P*, one character a match
    r.only_keys(node, path, {"type", "behavior"});
    steps.push_back(pattern_step(R"([\p{P}\x21-\x2F\x3A-\x40\x5B-\x60\x7B-\x7E])",
                                 read_behavior(r, node, path, "Isolated"), false, "Punctuation pattern"));
  } else {
    r.unsupported_type(path, type);
  }
}

void pre_tokenize(const std::vector<PreTokenizeStep>& steps, std::string_view text,
                  std::deque<std::string>& arena, std::vector<std::string_view>& out, bool at_origin) {
  std::vector<std::string_view> current;
  std::vector<uint8_t> origin;  // per piece: it starts at offset 0 of the input
  if (!text.empty()) {
    current.push_back(text);
    origin.push_back(at_origin ? 1 : 0);
  }
  std::vector<std::string_view> next;
  std::vector<uint8_t> next_origin;
  std::vector<std::pair<size_t, size_t>> scratch;
  for (const PreTokenizeStep& step : steps) {
    next.clear();
    next_origin.clear();
    for (size_t k = 0; k < current.size(); ++k) {
      std::string_view piece = current[k];
      const bool o = origin[k] != 0;
      scratch.clear();
      switch (step.kind) {
        case PreTokenizeStep::Kind::split_isolated:
          step.regex->find_all(piece, scratch);
          split_by(piece, o, scratch, step.invert, step.behavior, next, next_origin);
          break;
        case PreTokenizeStep::Kind::digits:
          split_digits(piece, step.individual_digits, scratch);
          split_by(piece, o, scratch, false, SplitBehavior::isolated, next, next_origin);
          break;
        case PreTokenizeStep::Kind::metaspace:
          metaspace(step, piece, o, arena, scratch, next, next_origin);
          break;
        case PreTokenizeStep::Kind::byte_level:
          if (step.add_prefix_space && piece.front() != ' ') {
            std::string& prefixed = arena.emplace_back();
            prefixed.reserve(piece.size() + 1);
            prefixed.push_back(' ');
            prefixed.append(piece);
            piece = prefixed;
          }
          if (step.regex) {
            step.regex->find_all(piece, scratch);
            split_by(piece, o, scratch, false, SplitBehavior::isolated, next, next_origin);
          } else {
            next.push_back(piece);
            next_origin.push_back(o ? 1 : 0);
          }
          break;
      }
    }
    current.swap(next);
    origin.swap(next_origin);
  }
  out.insert(out.end(), current.begin(), current.end());
}

}  // namespace titan::data
