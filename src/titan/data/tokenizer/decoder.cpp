#include "titan/data/tokenizer/decoder.h"

#include "titan/data/tokenizer/pre_tokenizer.h"
#include "titan/data/tokenizer/unicode.h"

namespace titan::data {
namespace {

using nlohmann::json;

void read_node(const JsonReader& r, const json& node, const std::string& path, std::vector<DecodeStep>& steps) {
  const std::string type = r.string(node, path, "type");
  DecodeStep step;
  if (type == "Sequence") {
    r.only_keys(node, path, {"type", "decoders"});
    const json& list = r.member(node, path, "decoders");
    if (!list.is_array()) r.fail(path + ".decoders", "must be an array");
    for (size_t i = 0; i < list.size(); ++i) read_node(r, list[i], str(path, ".decoders[", i, "]"), steps);
    return;
  }
  if (type == "ByteLevel") {
    // Its options (add_prefix_space, trim_offsets, use_regex) do not change decoding.
    r.only_keys(node, path, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
    step.kind = DecodeStep::Kind::byte_level;
  } else if (type == "Metaspace") {
    step.kind = DecodeStep::Kind::metaspace;
    step.text = r.string(node, path, "replacement");
    if (!is_one_char(step.text)) r.fail(path + ".replacement", "must be one character");
    const std::string scheme = read_metaspace_scheme(r, node, path);
    if (scheme != "always" && scheme != "first" && scheme != "never") {
      r.fail(path + ".prepend_scheme", str("\"", scheme, "\" is not supported (always, first or never)"));
    }
    step.prepend_never = scheme == "never";
    r.boolean(node, path, "split", true);  // splitting is the pre-tokenizer's business
  } else if (type == "ByteFallback" || type == "Fuse") {
    r.only_keys(node, path, {"type"});
    step.kind = type == "Fuse" ? DecodeStep::Kind::fuse : DecodeStep::Kind::byte_fallback;
  } else if (type == "Strip") {
    r.only_keys(node, path, {"type", "content", "start", "stop"});
    step.kind = DecodeStep::Kind::strip;
    step.text = r.string(node, path, "content");
    if (!is_one_char(step.text)) r.fail(path + ".content", "must be one character");
    step.start = static_cast<size_t>(r.integer(node, path, "start", 0, 1 << 20));
    step.stop = static_cast<size_t>(r.integer(node, path, "stop", 0, 1 << 20));
  } else if (type == "Replace") {
    r.only_keys(node, path, {"type", "pattern", "content"});
    step.kind = DecodeStep::Kind::replace;
    bool is_regex = false;
    step.text = r.pattern(node, path, is_regex);
    if (is_regex) r.fail(path + ".pattern", "{\"Regex\": ...} is not supported in a decoder (only {\"String\": ...})");
    if (step.text.empty()) r.fail(path + ".pattern", "must not be empty");
    step.content = r.string(node, path, "content");
  } else {
    r.unsupported_type(path, type);
  }
  steps.push_back(std::move(step));
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  std::string out;
  size_t prev = 0;
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, prev)) {
    out.append(s, prev, at - prev);
    out += to;
    prev = at + from.size();
  }
  out.append(s, prev);
  s.swap(out);
}

// "<0xNN>" -> the byte, as HF (u8::from_str_radix on the two characters, which takes a "+" sign).
int byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  if (t[3] == '+') return hex(t[4]);
  const int hi = hex(t[3]);
  const int lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// HF's Strip: up to `start` leading and `stop` trailing copies of `c` (one character) cut.
void strip(std::string& s, const std::string& c, size_t start, size_t stop) {
  size_t begin = 0;
  for (size_t i = 0; i < start && s.compare(begin, c.size(), c) == 0 && begin + c.size() <= s.size(); ++i) {
    begin += c.size();
  }
  size_t end = s.size();
  for (size_t i = 0; i < stop && end >= begin + c.size() && s.compare(end - c.size(), c.size(), c) == 0; ++i) {
    end -= c.size();
  }
  s = s.substr(begin, end - begin);
}

}  // namespace

std::string byte_level_decode(std::string_view token) {
  const ByteLevelMap& map = byte_level_map();
  std::string out;
  for (size_t i = 0; i < token.size();) {
    int len = 1;
    const char32_t cp = utf8_decode(token, i, len);
    if (cp >= map.cp_to_byte.size() || map.cp_to_byte[cp] < 0) return std::string(token);
    out += static_cast<char>(map.cp_to_byte[cp]);
    i += static_cast<size_t>(len);
  }
  return out;
}

Decoder Decoder::read(const JsonReader& r, const json* node) {
  Decoder out;
  out.none_ = node == nullptr;
  if (node != nullptr) read_node(r, *node, "decoder", out.steps_);
  return out;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  if (none_) {
    std::string joined;
    for (size_t i = 0; i < tokens.size(); ++i) joined += (i == 0 ? "" : " ") + tokens[i];
    return joined;
  }
  for (const DecodeStep& step : steps_) {
    switch (step.kind) {
      case DecodeStep::Kind::byte_level: {  // joins everything into one token
        std::string all;
        for (const std::string& t : tokens) all += byte_level_decode(t);
        tokens.assign(1, std::move(all));
        break;
      }
      case DecodeStep::Kind::metaspace:
        // HF drops every replacement character of the first token (unless "never"); elsewhere it is ' '.
        for (size_t i = 0; i < tokens.size(); ++i) {
          replace_all(tokens[i], step.text, i == 0 && !step.prepend_never ? "" : " ");
        }
        break;
      case DecodeStep::Kind::byte_fallback: {
        std::vector<std::string> out;
        std::string bytes;  // a run of <0xNN> tokens, kept as one token
        bool in_run = false;
        for (std::string& t : tokens) {
          const int b = byte_token(t);
          if (b >= 0) {
            bytes += static_cast<char>(b);
            in_run = true;
            continue;
          }
          if (in_run) out.push_back(std::move(bytes));
          bytes.clear();
          in_run = false;
          out.push_back(std::move(t));
        }
        if (in_run) out.push_back(std::move(bytes));
        tokens.swap(out);
        break;
      }
      case DecodeStep::Kind::fuse: {
        std::string all;
        for (const std::string& t : tokens) all += t;
        tokens.assign(1, std::move(all));
        break;
      }
      case DecodeStep::Kind::strip:
        for (std::string& t : tokens) strip(t, step.text, step.start, step.stop);
        break;
      case DecodeStep::Kind::replace:
        for (std::string& t : tokens) replace_all(t, step.text, step.content);
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

}  // namespace titan::data
