#include "titan/data/tokenizer/normalizer.h"

#include "titan/core/error.h"
#include "titan/data/tokenizer/unicode.h"

namespace titan::data {
namespace {

constexpr size_t kMaxExpansion = 64;     // NFKD's widest character grows 18-fold; "▁" for " " 3-fold
constexpr size_t kExpansionSlack = 4096;  // short texts (a Prepend, a one-character input)

using nlohmann::json;

void read_node(const JsonReader& r, const json& node, const std::string& path, std::vector<NormalizeStep>& steps) {
  const std::string type = r.string(node, path, "type");
  NormalizeStep step;
  if (type == "Sequence") {
    r.only_keys(node, path, {"type", "normalizers"});
    const json& list = r.member(node, path, "normalizers");
    if (!list.is_array()) r.fail(path + ".normalizers", "must be an array");
    for (size_t i = 0; i < list.size(); ++i) read_node(r, list[i], str(path, ".normalizers[", i, "]"), steps);
    return;
  }
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD" || type == "Lowercase") {
    r.only_keys(node, path, {"type"});
    step.kind = type == "NFC"    ? NormalizeStep::Kind::nfc
                : type == "NFD"  ? NormalizeStep::Kind::nfd
                : type == "NFKC" ? NormalizeStep::Kind::nfkc
                : type == "NFKD" ? NormalizeStep::Kind::nfkd
                                 : NormalizeStep::Kind::lowercase;
  } else if (type == "Strip") {
    r.only_keys(node, path, {"type", "strip_left", "strip_right"});
    step.kind = NormalizeStep::Kind::strip;
    step.strip_left = r.boolean(node, path, "strip_left", true);
    step.strip_right = r.boolean(node, path, "strip_right", true);
  } else if (type == "Prepend") {
    r.only_keys(node, path, {"type", "prepend"});
    step.kind = NormalizeStep::Kind::prepend;
    step.text = r.string(node, path, "prepend");
  } else if (type == "Replace") {
    r.only_keys(node, path, {"type", "pattern", "content"});
    step.kind = NormalizeStep::Kind::replace;
    bool is_regex = false;
    const std::string pattern = r.pattern(node, path, is_regex);
    if (pattern.empty()) r.fail(path + ".pattern", "must not be empty");
    step.pattern = std::make_shared<const Regex>(pattern, !is_regex, r.where() + ": " + path + ".pattern");
    step.text = r.string(node, path, "content");
  } else {
    r.unsupported_type(path, type);
  }
  steps.push_back(std::move(step));
}

// Rust's str::trim_start / trim_end: White_Space characters.
std::string_view strip(std::string_view text, bool left, bool right) {
  size_t begin = 0;
  size_t end = text.size();
  while (left && begin < end) {
    int len = 1;
    if (!is_whitespace(utf8_decode(text, begin, len))) break;
    begin += static_cast<size_t>(len);
  }
  while (right && end > begin) {
    size_t i = end - 1;
    while (i > begin && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
    int len = 1;
    if (!is_whitespace(utf8_decode(text, i, len))) break;
    end = i;
  }
  return text.substr(begin, end - begin);
}

// `given`: the bytes the normalizer was given; a step's output may be at most kMaxExpansion times
// that (plus kExpansionSlack): a chain of Replace steps can grow 10 characters into gigabytes.
std::string replace_all(const Regex& pattern, std::string_view text, const std::string& content, size_t given) {
  std::vector<std::pair<size_t, size_t>> matches;
  pattern.find_all(text, matches);
  size_t size = text.size();
  for (const auto& [begin, end] : matches) size += content.size() - (end - begin);  // wraps back: never negative
  TITAN_CHECK(size <= kMaxExpansion * given + kExpansionSlack, "[tokenizer] normalizer: a Replace step turns ",
              given, " bytes of text into ", size, " bytes (at most ", kMaxExpansion,
              " times as many). HINT: the tokenizer.json's normalizer expands without bound; fix its Replace steps");
  std::string out;
  out.reserve(size);
  size_t prev = 0;
  for (const auto& [begin, end] : matches) {
    out.append(text.substr(prev, begin - prev));
    out += content;
    prev = end;
  }
  out.append(text.substr(prev));
  return out;
}

}  // namespace

Normalizer Normalizer::read(const JsonReader& r, const json* node) {
  Normalizer out;
  if (node != nullptr) read_node(r, *node, "normalizer", out.steps_);
  return out;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string s(text);
  for (const NormalizeStep& step : steps_) {
    switch (step.kind) {
      case NormalizeStep::Kind::nfc: s = unicode_normalize(s, UnicodeForm::nfc); break;
      case NormalizeStep::Kind::nfd: s = unicode_normalize(s, UnicodeForm::nfd); break;
      case NormalizeStep::Kind::nfkc: s = unicode_normalize(s, UnicodeForm::nfkc); break;
      case NormalizeStep::Kind::nfkd: s = unicode_normalize(s, UnicodeForm::nfkd); break;
      case NormalizeStep::Kind::lowercase: s = lowercase(s); break;
      case NormalizeStep::Kind::strip: s = std::string(strip(s, step.strip_left, step.strip_right)); break;
      case NormalizeStep::Kind::prepend:
        if (!s.empty()) s.insert(0, step.text);  // HF prepends to non-empty text only
        break;
      case NormalizeStep::Kind::replace: s = replace_all(*step.pattern, s, step.text, text.size()); break;
    }
  }
  return s;
}

}  // namespace titan::data
