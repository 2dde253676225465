#include "titan/data/tokenizer/tokenizer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "titan/core/abbreviate.h"
#include "titan/core/error.h"
#include "titan/data/tokenizer/added_tokens.h"
#include "titan/data/tokenizer/bpe.h"
#include "titan/data/tokenizer/pre_tokenizer.h"
#include "titan/data/tokenizer/unicode.h"

namespace titan::data {

using nlohmann::json;

struct Tokenizer::Impl {
  std::vector<AddedToken> added;
  std::unordered_map<std::string, int32_t> added_ids;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized == false
  AddedTokenMatcher normalized_matcher;  // added tokens with normalized == true (NFC'd contents)
  bool nfc = false;
  std::vector<PreTokenizeStep> steps;
  std::unique_ptr<Bpe> bpe;
  std::vector<std::string> id_bytes;  // id -> decoded bytes
  std::vector<uint8_t> id_known;      // id -> 1 when the id exists

  void encode_normalized(std::string_view text, std::vector<int32_t>& ids) const;
};

namespace {

// Reads tokenizer.json fields with errors that name the file and the JSON path.
class Reader {
 public:
  explicit Reader(std::string where) : where_(std::move(where)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    TITAN_FAIL("[tokenizer] ", where_, ": ", path, " ", what);
  }

  const json& member(const json& obj, const std::string& path, const char* key) const {
    if (!obj.is_object()) fail(path, "must be an object");
    const auto it = obj.find(key);
    if (it == obj.end()) fail(join(path, key), "is missing");
    return *it;
  }
  const json* optional(const json& obj, const char* key) const {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  std::string string(const json& obj, const std::string& path, const char* key) const {
    const json& v = member(obj, path, key);
    if (!v.is_string()) fail(join(path, key), "must be a string");
    return v.get<std::string>();
  }
  bool boolean(const json& obj, const std::string& path, const char* key, bool fallback) const {
    const json* v = optional(obj, key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(join(path, key), "must be true or false");
    return v->get<bool>();
  }
  // Rejects keys this reader does not know: an unknown option would otherwise be ignored silently.
  void only_keys(const json& obj, const std::string& path, std::initializer_list<const char*> keys) const {
    if (!obj.is_object()) fail(path.empty() ? "(top level)" : path, "must be an object");
    for (const auto& item : obj.items()) {
      const bool known = std::any_of(keys.begin(), keys.end(), [&](const char* k) { return item.key() == k; });
      if (!known) fail(join(path, item.key()), "is not supported");
    }
  }
  [[noreturn]] void unsupported_type(const std::string& path, const std::string& type) const {
    fail(path + ".type", str("\"", type, "\" is not supported"));
  }
  const std::string& where() const { return where_; }

  static std::string join(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

 private:
  std::string where_;
};

void read_pre_tokenizer(const Reader& r, const json& node, const std::string& path,
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
    const std::string behavior = r.string(node, path, "behavior");
    if (behavior != "Isolated") {
      r.fail(path + ".behavior", str("\"", behavior, "\" is not supported (only \"Isolated\")"));
    }
    if (r.boolean(node, path, "invert", false)) r.fail(path + ".invert", "true is not supported");
    const json& pattern = r.member(node, path, "pattern");
    if (!pattern.is_object() || pattern.size() != 1 || !pattern.begin()->is_string() ||
        (pattern.begin().key() != "Regex" && pattern.begin().key() != "String")) {
      r.fail(path + ".pattern", "must be {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    }
    PreTokenizeStep step;
    step.kind = PreTokenizeStep::Kind::split_isolated;
    step.regex = std::make_shared<const Regex>(pattern.begin()->get<std::string>(), pattern.begin().key() == "String",
                                               r.where() + ": " + path + ".pattern");
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
  } else {
    r.unsupported_type(path, type);
  }
}

// Decoder and post-processor: only ByteLevel, whose options affect offsets, not ids or bytes.
void read_byte_level_only(const Reader& r, const json& root, const char* key, bool allow_null) {
  const json* node = r.optional(root, key);
  if (node == nullptr) {
    if (!allow_null) r.fail(key, "is null; a byte-level BPE needs the ByteLevel decoder");
    return;
  }
  const std::string type = r.string(*node, key, "type");
  if (type != "ByteLevel") r.unsupported_type(key, type);
  r.only_keys(*node, key, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
}

std::string read_file(const std::string& path) {
  struct stat st {};
  TITAN_CHECK(::stat(path.c_str(), &st) == 0, "[tokenizer] cannot read ", path, ": ", std::strerror(errno),
              ". HINT: pass a tokenizer.json file or the folder that holds one");
  TITAN_CHECK(S_ISREG(st.st_mode), "[tokenizer] cannot read ", path, ": not a regular file");
  std::ifstream in(path, std::ios::binary);
  TITAN_CHECK(in.good(), "[tokenizer] cannot open ", path);
  std::ostringstream os;
  os << in.rdbuf();
  TITAN_CHECK(!in.bad(), "[tokenizer] cannot read ", path);
  return os.str();
}

// ByteLevel decoding of one token's text, as HF's ByteLevel decoder does: each character back to its
// byte; a token with a character outside the byte map is kept as its own UTF-8 bytes.
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

}  // namespace

Tokenizer Tokenizer::from_json_text(std::string_view json_text, const std::string& where) {
  json root;
  try {
    root = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    std::string msg = e.what();
    const size_t at = msg.find("parse error");
    if (at != std::string::npos) msg = msg.substr(at);
    TITAN_FAIL("[tokenizer] ", where, ": invalid JSON: ", msg);
  }
  const Reader r(where);
  r.only_keys(root, "", {"version", "truncation", "padding", "added_tokens", "normalizer",
                                    "pre_tokenizer", "post_processor", "decoder", "model"});
  if (r.optional(root, "truncation") != nullptr) r.fail("truncation", "must be null (truncation is not supported)");
  if (r.optional(root, "padding") != nullptr) r.fail("padding", "must be null (padding is not supported)");

  auto impl = std::make_unique<Impl>();

  // normalizer: null or NFC.
  if (const json* node = r.optional(root, "normalizer")) {
    const std::string type = r.string(*node, "normalizer", "type");
    if (type != "NFC") r.unsupported_type("normalizer", type);
    r.only_keys(*node, "normalizer", {"type"});
    impl->nfc = true;
  }

  // pre_tokenizer: Split / Digits / Sequence of them, ending in ByteLevel.
  const json* pre = r.optional(root, "pre_tokenizer");
  if (pre == nullptr) r.fail("pre_tokenizer", "is null; a byte-level BPE needs a ByteLevel pre-tokenizer");
  read_pre_tokenizer(r, *pre, "pre_tokenizer", impl->steps);
  const auto byte_levels = std::count_if(impl->steps.begin(), impl->steps.end(), [](const PreTokenizeStep& s) {
    return s.kind == PreTokenizeStep::Kind::byte_level;
  });
  if (byte_levels != 1 || impl->steps.back().kind != PreTokenizeStep::Kind::byte_level) {
    r.fail("pre_tokenizer", "must end with one ByteLevel pre-tokenizer (the only byte-level layout supported)");
  }
  read_byte_level_only(r, root, "post_processor", true);
  read_byte_level_only(r, root, "decoder", false);

  // model: BPE with HF's default options.
  const json& model = r.member(root, "", "model");
  const std::string model_type = r.string(model, "model", "type");
  if (model_type != "BPE") r.unsupported_type("model", model_type);
  r.only_keys(model, "model", {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                               "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"});
  if (r.optional(model, "dropout") != nullptr) r.fail("model.dropout", "must be null (BPE dropout is not supported)");
  if (r.optional(model, "unk_token") != nullptr) r.fail("model.unk_token", "must be null (unk_token is not supported)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (const json* v = r.optional(model, key); v != nullptr && !(v->is_string() && v->get<std::string>().empty())) {
      r.fail(str("model.", key), "must be null or \"\" (not supported)");
    }
  }
  if (r.boolean(model, "model", "fuse_unk", false)) r.fail("model.fuse_unk", "true is not supported");
  if (r.boolean(model, "model", "byte_fallback", false)) r.fail("model.byte_fallback", "true is not supported");
  const bool ignore_merges = r.boolean(model, "model", "ignore_merges", false);

  const json& vocab_json = r.member(model, "model", "vocab");
  if (!vocab_json.is_object()) r.fail("model.vocab", "must be an object of token -> id");
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(vocab_json.size());
  int64_t max_id = -1;
  for (const auto& item : vocab_json.items()) {
    if (!item.value().is_number_integer() || item.value().get<int64_t>() < 0 ||
        item.value().get<int64_t>() > INT32_MAX) {
      r.fail(str("model.vocab[\"", item.key(), "\"]"), "must be an id in [0, 2^31)");
    }
    const auto id = static_cast<int32_t>(item.value().get<int64_t>());
    vocab.emplace(item.key(), id);
    max_id = std::max<int64_t>(max_id, id);
  }
  // One token per id: with two, decoding that id could give either (HF keeps whichever it read last).
  std::unordered_map<int32_t, const std::string*> token_of_id;
  token_of_id.reserve(vocab.size());
  for (const auto& [token, id] : vocab) {
    const auto [it, inserted] = token_of_id.emplace(id, &token);
    if (!inserted) {
      const std::string& a = std::min(*it->second, token), &b = std::max(*it->second, token);
      r.fail("model.vocab", str("gives id ", id, " to two tokens, \"", abbreviate(a), "\" and \"", abbreviate(b),
                                "\"; each id must name one token"));
    }
  }
  const json& merges_json = r.member(model, "model", "merges");
  if (!merges_json.is_array()) r.fail("model.merges", "must be an array");
  std::vector<Bpe::Merge> merges;
  merges.reserve(merges_json.size());
  for (size_t i = 0; i < merges_json.size(); ++i) {
    const json& m = merges_json[i];
    const std::string path = str("model.merges[", i, "]");
    // One form for the whole list, as HF reads it.
    if (i > 0 && m.is_string() != merges_json[0].is_string()) {
      r.fail(path, "mixes \"a b\" strings and [\"a\", \"b\"] pairs; use one form for all merges");
    }
    std::string left;
    std::string right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        r.fail(path, str("\"", s, "\" must be two tokens separated by one space"));
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      r.fail(path, "must be \"a b\" or [\"a\", \"b\"]");
    }
    const auto a = vocab.find(left);
    const auto b = vocab.find(right);
    const auto ab = vocab.find(left + right);
    if (a == vocab.end() || b == vocab.end() || ab == vocab.end()) {
      const std::string& missing = a == vocab.end() ? left : b == vocab.end() ? right : left + right;
      r.fail(path, str("\"", missing, "\" is not in model.vocab"));
    }
    merges.push_back({a->second, b->second, ab->second});
  }

  // added_tokens
  if (const json* list = r.optional(root, "added_tokens")) {
    if (!list->is_array()) r.fail("added_tokens", "must be an array");
    for (size_t i = 0; i < list->size(); ++i) {
      const json& t = (*list)[i];
      const std::string path = str("added_tokens[", i, "]");
      r.only_keys(t, path, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
      AddedToken token;
      const json& id = r.member(t, path, "id");
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        r.fail(path + ".id", "must be an id in [0, 2^31)");
      }
      token.id = static_cast<int32_t>(id.get<int64_t>());
      token.content = r.string(t, path, "content");
      if (token.content.empty()) r.fail(path + ".content", "must not be empty");
      if (utf8_invalid_offset(token.content) != token.content.size()) r.fail(path + ".content", "is not valid UTF-8");
      token.single_word = r.boolean(t, path, "single_word", false);
      token.lstrip = r.boolean(t, path, "lstrip", false);
      token.rstrip = r.boolean(t, path, "rstrip", false);
      token.normalized = r.boolean(t, path, "normalized", true);
      token.special = r.boolean(t, path, "special", false);
      impl->added_ids[token.content] = token.id;
      max_id = std::max<int64_t>(max_id, token.id);
      impl->added.push_back(std::move(token));
    }
  }
  std::vector<AddedToken> raw;
  std::vector<AddedToken> normalized;
  for (const AddedToken& t : impl->added) {
    if (t.normalized) {
      AddedToken n = t;
      if (impl->nfc) n.content = nfc(n.content);  // HF matches normalized tokens in their normalized form
      normalized.push_back(std::move(n));
    } else {
      raw.push_back(t);
    }
  }
  impl->raw_matcher = AddedTokenMatcher(std::move(raw));
  impl->normalized_matcher = AddedTokenMatcher(std::move(normalized));

  // id -> bytes for decode; added tokens take precedence over the vocabulary, as in HF.
  impl->id_bytes.assign(static_cast<size_t>(max_id + 1), std::string());
  impl->id_known.assign(static_cast<size_t>(max_id + 1), 0);
  for (const auto& [token, id] : vocab) {
    impl->id_bytes[id] = byte_level_decode(token);
    impl->id_known[id] = 1;
  }
  for (const AddedToken& t : impl->added) {
    // HF's id -> token gives a normalized token's content in its normalized form.
    impl->id_bytes[t.id] = byte_level_decode(t.normalized && impl->nfc ? nfc(t.content) : t.content);
    impl->id_known[t.id] = 1;
  }
  impl->bpe = std::make_unique<Bpe>(std::move(vocab), merges, ignore_merges);
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_file(const std::string& path_or_dir) {
  std::string path = path_or_dir;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) path += "/tokenizer.json";
  return from_json_text(read_file(path), path);
}

void Tokenizer::Impl::encode_normalized(std::string_view text, std::vector<int32_t>& ids) const {
  std::deque<std::string> arena;
  std::vector<std::string_view> pieces;
  pre_tokenize(steps, text, arena, pieces);
  for (const std::string_view piece : pieces) bpe->encode_piece(piece, ids);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  const size_t bad = utf8_invalid_offset(text);
  TITAN_CHECK(bad == text.size(), "[tokenizer] encode: text is not valid UTF-8 at byte ", bad,
              ". HINT: decode the input as UTF-8 (or replace invalid bytes) before tokenizing");
  std::vector<int32_t> ids;
  std::vector<Segment> segments;
  if (impl_->raw_matcher.empty()) {
    if (!text.empty()) segments.push_back({0, text.size(), -1});
  } else {
    impl_->raw_matcher.split(text, segments);
  }
  std::vector<Segment> inner;
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    const std::string_view part = text.substr(seg.begin, seg.end - seg.begin);
    std::string normalized_storage;
    std::string_view normalized = part;
    if (impl_->nfc) {
      normalized_storage = nfc(part);
      normalized = normalized_storage;
    }
    if (impl_->normalized_matcher.empty()) {
      impl_->encode_normalized(normalized, ids);
      continue;
    }
    inner.clear();
    impl_->normalized_matcher.split(normalized, inner);
    for (const Segment& s : inner) {
      if (s.id >= 0) {
        ids.push_back(s.id);
      } else {
        impl_->encode_normalized(normalized.substr(s.begin, s.end - s.begin), ids);
      }
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, int64_t* skipped) const {
  std::string out;
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= impl_->id_known.size() || !impl_->id_known[id]) {
      if (skipped != nullptr) ++*skipped;
      continue;
    }
    out += impl_->id_bytes[id];
  }
  return out;
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->id_known.size()); }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  const std::string key(token);
  if (const auto it = impl_->added_ids.find(key); it != impl_->added_ids.end()) return it->second;
  const auto& vocab = impl_->bpe->vocab();
  if (const auto it = vocab.find(key); it != vocab.end()) return it->second;
  return std::nullopt;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

}  // namespace titan::data
