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
#include "titan/core/log.h"
#include "titan/core/error.h"
#include "titan/core/nesting.h"
#include "titan/data/tokenizer/added_tokens.h"
#include "titan/data/tokenizer/bpe.h"
#include "titan/data/tokenizer/decoder.h"
#include "titan/data/tokenizer/json_reader.h"
#include "titan/data/tokenizer/normalizer.h"
#include "titan/data/tokenizer/post_processor.h"
#include "titan/data/tokenizer/pre_tokenizer.h"
#include "titan/data/tokenizer/unicode.h"

namespace titan::data {

using nlohmann::json;

struct Tokenizer::Impl {
  std::vector<AddedToken> added;
  std::unordered_map<std::string, int32_t> added_ids;
  AddedTokenMatcher raw_matcher;         // added tokens with normalized == false
  AddedTokenMatcher normalized_matcher;  // added tokens with normalized == true (normalized contents)
  Normalizer normalizer;
  std::vector<PreTokenizeStep> steps;
  std::unique_ptr<Bpe> bpe;
  SequenceSpecials specials;          // what add_special_tokens puts around a sequence
  Decoder decoder;
  bool byte_level = false;            // the ByteLevel layout: each id decodes on its own (fast path)
  std::vector<std::string> id_token;  // id -> token text (vocabulary entry or added token content)
  std::vector<std::string> id_bytes;  // id -> decoded bytes (byte-level layout)
  std::vector<uint8_t> id_known;      // id -> 1 when the id exists

  void encode_normalized(std::string_view text, bool at_origin, std::vector<int32_t>& ids) const;
};

namespace {

using Reader = JsonReader;

// The id HF tokenizers gives an added token, whatever id the file says (its AddedVocabulary::
// add_tokens, which loading runs; a differing id only logs a warning there): the id of an earlier
// added token of the same content, else the vocabulary's id of that content, else the next free
// id past the vocabulary: its entry count when no added id reaches it yet, else the largest added
// id + 1. `largest_added`: the largest id given so far, -1 before the first.
int32_t added_token_id(const std::unordered_map<std::string, int32_t>& added,
                       const std::unordered_map<std::string, int32_t>& vocab, const std::string& content,
                       int32_t largest_added) {
  if (const auto it = added.find(content); it != added.end()) return it->second;
  if (const auto it = vocab.find(content); it != vocab.end()) return it->second;
  const auto count = static_cast<int32_t>(vocab.size());
  if (largest_added < 0) return count;
  return largest_added >= count || count == 0 ? largest_added + 1 : count;
}

std::string added_id_reason(const std::unordered_map<std::string, int32_t>& added,
                            const std::unordered_map<std::string, int32_t>& vocab, const std::string& content) {
  if (added.count(content) != 0) return "an earlier added token has this content";
  if (vocab.count(content) != 0) return "the vocabulary holds this content";
  return "the next id after the vocabulary and the added tokens before it";
}

// Ids index titan's id -> token tables, sized by the largest id: an id of 2^31 - 1 in a file of
// 300 tokens would size them at tens of GB. The largest published vocabularies hold ~260k ids.
constexpr int64_t kMaxTokenIds = int64_t{1} << 24;
constexpr const char* kTokenIdRange =
    "must be an id in [0, 2^24) (16,777,216 ids, far beyond any published vocabulary; titan sizes its id tables by "
    "the largest id)";

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

}  // namespace

Tokenizer Tokenizer::from_json_text(std::string_view json_text, const std::string& where) {
  check_json_nesting(json_text, str("[tokenizer] ", where));
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

  impl->normalizer = Normalizer::read(r, r.optional(root, "normalizer"));

  // pre_tokenizer: byte-level layouts end in one ByteLevel (Qwen3, GPT-2, Llama 3); the others
  // (Metaspace, Whitespace, ..., or none: Llama 2, Mistral, Gemma) have no ByteLevel at all.
  if (const json* pre = r.optional(root, "pre_tokenizer")) read_pre_tokenizer(r, *pre, "pre_tokenizer", impl->steps);
  const auto byte_levels = std::count_if(impl->steps.begin(), impl->steps.end(), [](const PreTokenizeStep& s) {
    return s.kind == PreTokenizeStep::Kind::byte_level;
  });
  impl->byte_level = byte_levels > 0;
  if (impl->byte_level && (byte_levels != 1 || impl->steps.back().kind != PreTokenizeStep::Kind::byte_level)) {
    r.fail("pre_tokenizer", "must end with its one ByteLevel pre-tokenizer (the only byte-level layout supported)");
  }
  impl->specials = read_post_processor(r, r.optional(root, "post_processor"));
  impl->decoder = Decoder::read(r, r.optional(root, "decoder"));

  // model: BPE.
  const json& model = r.member(root, "", "model");
  const std::string model_type = r.string(model, "model", "type");
  if (model_type != "BPE") r.unsupported_type("model", model_type);
  r.only_keys(model, "model", {"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                               "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges"});
  if (const json* v = r.optional(model, "dropout"); v != nullptr && !(v->is_number() && v->get<double>() == 0.0)) {
    r.fail("model.dropout", "must be null or 0 (BPE dropout is not supported)");
  }
  Bpe::Options options;
  options.byte_level = impl->byte_level;
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const json* v = r.optional(model, key);
    if (v != nullptr && !v->is_string()) r.fail(str("model.", key), "must be null or a string");
    (key[0] == 'c' ? options.continuing_subword_prefix : options.end_of_word_suffix) = v ? v->get<std::string>() : "";
  }
  options.fuse_unk = r.boolean(model, "model", "fuse_unk", false);
  options.byte_fallback = r.boolean(model, "model", "byte_fallback", false);
  options.ignore_merges = r.boolean(model, "model", "ignore_merges", false);
  const json* unk_token = r.optional(model, "unk_token");
  if (unk_token != nullptr && !unk_token->is_string()) r.fail("model.unk_token", "must be null or a string");

  const json& vocab_json = r.member(model, "model", "vocab");
  if (!vocab_json.is_object()) r.fail("model.vocab", "must be an object of token -> id");
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(vocab_json.size());
  int64_t max_id = -1;
  for (const auto& item : vocab_json.items()) {
    if (!item.value().is_number_integer() || item.value().get<int64_t>() < 0 ||
        item.value().get<int64_t>() >= kMaxTokenIds) {
      r.fail(str("model.vocab[\"", abbreviate(item.key()), "\"]"), kTokenIdRange);
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
    // HF's merged token drops the right part's continuing_subword_prefix.
    const std::string& prefix = options.continuing_subword_prefix;
    const bool prefixed = !prefix.empty() && right.compare(0, prefix.size(), prefix) == 0;
    const auto ab = vocab.find(left + (prefixed ? right.substr(prefix.size()) : right));
    if (a == vocab.end() || b == vocab.end() || ab == vocab.end()) {
      const std::string& missing =
          a == vocab.end() ? left : b == vocab.end() ? right : left + (prefixed ? right.substr(prefix.size()) : right);
      r.fail(path, str("\"", missing, "\" is not in model.vocab"));
    }
    merges.push_back({a->second, b->second, ab->second});
  }

  // added_tokens
  if (const json* list = r.optional(root, "added_tokens")) {
    if (!list->is_array()) r.fail("added_tokens", "must be an array");
    int32_t largest_added = -1;  // the largest id given so far
    for (size_t i = 0; i < list->size(); ++i) {
      const json& t = (*list)[i];
      const std::string path = str("added_tokens[", i, "]");
      r.only_keys(t, path, {"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special"});
      AddedToken token;
      const json& id = r.member(t, path, "id");
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxTokenIds) {
        r.fail(path + ".id", kTokenIdRange);
      }
      const int64_t file_id = id.get<int64_t>();
      token.content = r.string(t, path, "content");
      if (token.content.empty()) r.fail(path + ".content", "must not be empty");
      if (utf8_invalid_offset(token.content) != token.content.size()) r.fail(path + ".content", "is not valid UTF-8");
      token.single_word = r.boolean(t, path, "single_word", false);
      token.lstrip = r.boolean(t, path, "lstrip", false);
      token.rstrip = r.boolean(t, path, "rstrip", false);
      token.normalized = r.boolean(t, path, "normalized", true);
      token.special = r.boolean(t, path, "special", false);
      token.id = added_token_id(impl->added_ids, vocab, token.content, largest_added);
      if (token.id != file_id) {
        log_warn(str("[tokenizer] ", where, ": ", path, " \"", abbreviate(token.content), "\" has id ", file_id,
                     " in the file; HF tokenizers gives it ", token.id, " (", added_id_reason(impl->added_ids, vocab, token.content),
                     "), and so does titan"));
      }
      max_id = std::max<int64_t>(max_id, token.id);
      largest_added = std::max(largest_added, token.id);
      if (impl->added_ids.count(token.content) != 0) {  // HF keeps one entry per content, the later one's flags
        *std::find_if(impl->added.begin(), impl->added.end(),
                      [&](const AddedToken& a) { return a.content == token.content; }) = std::move(token);
      } else {
        impl->added_ids[token.content] = token.id;
        impl->added.push_back(std::move(token));
      }
    }
  }
  if (unk_token != nullptr) {
    const auto it = vocab.find(unk_token->get<std::string>());
    if (it == vocab.end()) r.fail("model.unk_token", str("\"", unk_token->get<std::string>(), "\" is not in model.vocab"));
    options.unk_id = it->second;
  }
  // HF matches normalized added tokens in their normalized form, and its id -> token gives that form.
  for (AddedToken& t : impl->added) {
    if (t.normalized && !impl->normalizer.empty()) t.content = impl->normalizer.apply(t.content);
  }
  std::vector<AddedToken> raw;
  std::vector<AddedToken> normalized;
  for (const AddedToken& t : impl->added) (t.normalized ? normalized : raw).push_back(t);
  impl->raw_matcher = AddedTokenMatcher(std::move(raw));
  impl->normalized_matcher = AddedTokenMatcher(std::move(normalized));

  // id -> token for decode; added tokens take precedence over the vocabulary, as in HF.
  impl->id_token.assign(static_cast<size_t>(max_id + 1), std::string());
  impl->id_known.assign(static_cast<size_t>(max_id + 1), 0);
  for (const auto& [token, id] : vocab) {
    impl->id_token[id] = token;
    impl->id_known[id] = 1;
  }
  for (const AddedToken& t : impl->added) {
    impl->id_token[t.id] = t.content;
    impl->id_known[t.id] = 1;
  }
  if (impl->decoder.byte_level_only()) {  // each id decodes on its own: precompute the bytes
    impl->id_bytes.resize(impl->id_token.size());
    for (size_t id = 0; id < impl->id_token.size(); ++id) impl->id_bytes[id] = byte_level_decode(impl->id_token[id]);
  }
  impl->bpe = std::make_unique<Bpe>(std::move(vocab), merges, std::move(options));
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_file(const std::string& path_or_dir) {
  std::string path = path_or_dir;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) path += "/tokenizer.json";
  return from_json_text(read_file(path), path);
}

void Tokenizer::Impl::encode_normalized(std::string_view text, bool at_origin, std::vector<int32_t>& ids) const {
  std::deque<std::string> arena;
  std::vector<std::string_view> pieces;
  pre_tokenize(steps, text, arena, pieces, at_origin);
  for (const std::string_view piece : pieces) bpe->encode_piece(piece, ids);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const size_t bad = utf8_invalid_offset(text);
  TITAN_CHECK(bad == text.size(), "[tokenizer] encode: text is not valid UTF-8 at byte ", bad,
              ". HINT: decode the input as UTF-8 (or replace invalid bytes) before tokenizing");
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = impl_->specials.prefix;
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
    if (!impl_->normalizer.empty()) {
      normalized_storage = impl_->normalizer.apply(part);
      normalized = normalized_storage;
    }
    if (impl_->normalized_matcher.empty()) {
      impl_->encode_normalized(normalized, seg.begin == 0, ids);
      continue;
    }
    inner.clear();
    impl_->normalized_matcher.split(normalized, inner);
    for (const Segment& s : inner) {
      if (s.id >= 0) {
        ids.push_back(s.id);
      } else {
        impl_->encode_normalized(normalized.substr(s.begin, s.end - s.begin), seg.begin == 0 && s.begin == 0, ids);
      }
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), impl_->specials.suffix.begin(), impl_->specials.suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, int64_t* skipped) const {
  const bool fast = !impl_->id_bytes.empty();
  std::string out;
  std::vector<std::string> tokens;
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= impl_->id_known.size() || !impl_->id_known[id]) {
      if (skipped != nullptr) ++*skipped;
      continue;
    }
    if (fast) {
      out += impl_->id_bytes[id];
    } else {
      tokens.push_back(impl_->id_token[id]);
    }
  }
  return fast ? out : impl_->decoder.decode(std::move(tokens));
}

const std::vector<int32_t>& Tokenizer::special_prefix() const { return impl_->specials.prefix; }
const std::vector<int32_t>& Tokenizer::special_suffix() const { return impl_->specials.suffix; }

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
