#define PCRE2_CODE_UNIT_WIDTH 8
#include "titan/data/tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <memory>

#include "titan/core/error.h"
#include "titan/data/tokenizer/unicode.h"

namespace titan::data {
namespace {

// Unicode White_Space, which Oniguruma's \s matches (and Rust's char::is_whitespace): the
// separator categories Zs/Zl/Zp (from PCRE2's Unicode tables) plus the controls TAB..CR and NEL.
// PCRE2's own \s also takes U+180E (Cf since Unicode 6.3), which Oniguruma does not.
constexpr std::string_view kWhiteSpaceClass = R"(\p{Zs}\p{Zl}\p{Zp}\t\n\x0B\f\r\x{85})";

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
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0u);
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

// Isolated: every match and every gap between matches is its own piece.
void split_isolated(const Regex& regex, std::string_view piece, std::vector<std::pair<size_t, size_t>>& scratch,
                    std::vector<std::string_view>& out) {
  scratch.clear();
  regex.find_all(piece, scratch);
  size_t prev = 0;
  for (const auto& [begin, end] : scratch) {
    if (begin > prev) out.push_back(piece.substr(prev, begin - prev));
    out.push_back(piece.substr(begin, end - begin));
    prev = end;
  }
  if (prev < piece.size()) out.push_back(piece.substr(prev));
}

// Digits: each numeric character alone (individual) or runs of numeric characters (contiguous);
// the text between them forms pieces too.
void split_digits(std::string_view piece, bool individual, std::vector<std::string_view>& out) {
  size_t run_start = 0;
  bool run_numeric = false;
  size_t i = 0;
  while (i < piece.size()) {
    int len = 1;
    const bool numeric = is_numeric(utf8_decode(piece, i, len));
    if (i > run_start && (numeric != run_numeric || (numeric && individual))) {
      out.push_back(piece.substr(run_start, i - run_start));
      run_start = i;
    }
    run_numeric = numeric;
    i += static_cast<size_t>(len);
  }
  if (i > run_start) out.push_back(piece.substr(run_start, i - run_start));
}

}  // namespace

void pre_tokenize(const std::vector<PreTokenizeStep>& steps, std::string_view text,
                  std::deque<std::string>& arena, std::vector<std::string_view>& out) {
  std::vector<std::string_view> current;
  if (!text.empty()) current.push_back(text);
  std::vector<std::string_view> next;
  std::vector<std::pair<size_t, size_t>> scratch;
  for (const PreTokenizeStep& step : steps) {
    next.clear();
    for (std::string_view piece : current) {
      switch (step.kind) {
        case PreTokenizeStep::Kind::split_isolated:
          split_isolated(*step.regex, piece, scratch, next);
          break;
        case PreTokenizeStep::Kind::digits:
          split_digits(piece, step.individual_digits, next);
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
            split_isolated(*step.regex, piece, scratch, next);
          } else {
            next.push_back(piece);
          }
          break;
      }
    }
    current.swap(next);
  }
  out.insert(out.end(), current.begin(), current.end());
}

}  // namespace titan::data
