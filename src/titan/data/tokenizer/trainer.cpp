#include "titan/data/tokenizer/trainer.h"

#include <algorithm>
#include <array>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <queue>

#include "titan/core/error.h"
#include "titan/data/tokenizer/pre_tokenizer.h"
#include "titan/data/tokenizer/unicode.h"

namespace titan::data {

using nlohmann::ordered_json;

struct BpeTrainer::Splitter {
  std::vector<PreTokenizeStep> steps;
  Splitter() {
    PreTokenizeStep split;
    split.kind = PreTokenizeStep::Kind::split_isolated;
    split.regex = std::make_shared<const Regex>(kQwen3SplitPattern, false, "[train-tokenizer] Qwen3 split pattern");
    steps.push_back(std::move(split));
    PreTokenizeStep byte_level;  // add_prefix_space false, no regex: Qwen3's ByteLevel
    byte_level.kind = PreTokenizeStep::Kind::byte_level;
    steps.push_back(std::move(byte_level));
  }
};

BpeTrainer::BpeTrainer(int64_t vocab_size) : vocab_size_(vocab_size), splitter_(std::make_unique<Splitter>()) {
  TITAN_CHECK(vocab_size >= kMinTrainVocabSize && vocab_size <= kMaxTrainVocabSize, "[train-tokenizer] vocab size ",
              vocab_size, " is out of range; expected ", kMinTrainVocabSize, " (256 bytes + ", kTrainSpecialToken,
              ") to ", kMaxTrainVocabSize);
}

BpeTrainer::~BpeTrainer() = default;

void BpeTrainer::add_text(std::string_view text, const std::string& where) {
  const size_t bad = utf8_invalid_offset(text);
  TITAN_CHECK(bad == text.size(), "[train-tokenizer] ", where, ": invalid UTF-8 at byte ", bad);
  std::deque<std::string> arena;
  std::vector<std::string_view> pieces;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(kTrainSpecialToken, begin);
    if (end == std::string_view::npos) end = text.size();
    const std::string normalized = nfc(text.substr(begin, end - begin));
    pieces.clear();
    pre_tokenize(splitter_->steps, normalized, arena, pieces);
    for (std::string_view piece : pieces) ++word_counts_[std::string(piece)];
    num_pieces_ += static_cast<int64_t>(pieces.size());
    begin = end + kTrainSpecialToken.size();
  }
}

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

struct HeapEntry {
  int64_t count = 0;
  int32_t left = 0;
  int32_t right = 0;
};

// Merges every non-overlapping (left, right), scanning left to right, into `merged`.
void merge_word(std::vector<int32_t>& symbols, int32_t left, int32_t right, int32_t merged) {
  size_t out = 0;
  for (size_t i = 0; i < symbols.size();) {
    if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
      symbols[out++] = merged;
      i += 2;
    } else {
      symbols[out++] = symbols[i++];
    }
  }
  symbols.resize(out);
}

}  // namespace

TrainedBpe BpeTrainer::train() const {
  TrainedBpe result;
  result.num_pieces = num_pieces_;
  result.num_words = static_cast<int64_t>(word_counts_.size());

  // The 256 byte symbols, sorted by code point: GPT-2's vocabulary order.
  const ByteLevelMap& map = byte_level_map();
  std::array<int, 256> bytes{};
  for (int b = 0; b < 256; ++b) bytes[static_cast<size_t>(b)] = b;
  std::sort(bytes.begin(), bytes.end(), [&](int a, int b) {
    return map.byte_to_cp[static_cast<size_t>(a)] < map.byte_to_cp[static_cast<size_t>(b)];
  });
  std::array<int32_t, 256> byte_id{};
  std::unordered_map<std::string, int32_t> token_ids;
  for (size_t i = 0; i < 256; ++i) {
    byte_id[static_cast<size_t>(bytes[i])] = static_cast<int32_t>(i);
    result.tokens.push_back(map.byte_to_utf8[static_cast<size_t>(bytes[i])]);
    token_ids.emplace(result.tokens.back(), static_cast<int32_t>(i));
  }

  // Words in sorted order, so every index below is independent of hash order.
  std::vector<std::pair<std::string_view, int64_t>> sorted;
  sorted.reserve(word_counts_.size());
  for (const auto& [word, count] : word_counts_) sorted.emplace_back(word, count);
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::vector<int32_t>> words(sorted.size());
  std::vector<int64_t> counts(sorted.size());
  std::unordered_map<uint64_t, int64_t> pair_counts;
  std::unordered_map<uint64_t, std::vector<int32_t>> pair_words;  // may hold stale or repeated words
  for (size_t w = 0; w < sorted.size(); ++w) {
    counts[w] = sorted[w].second;
    for (const char c : sorted[w].first) words[w].push_back(byte_id[static_cast<unsigned char>(c)]);
    for (size_t i = 0; i + 1 < words[w].size(); ++i) {
      const uint64_t key = pair_key(words[w][i], words[w][i + 1]);
      pair_counts[key] += counts[w];
      pair_words[key].push_back(static_cast<int32_t>(w));
    }
  }

  // Max-heap on count, then the smallest (left, right) token texts.
  const std::vector<std::string>& tokens = result.tokens;
  const auto less_urgent = [&tokens](const HeapEntry& a, const HeapEntry& b) {
    if (a.count != b.count) return a.count < b.count;
    const std::string& al = tokens[static_cast<size_t>(a.left)];
    const std::string& bl = tokens[static_cast<size_t>(b.left)];
    if (al != bl) return al > bl;
    return tokens[static_cast<size_t>(a.right)] > tokens[static_cast<size_t>(b.right)];
  };
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, decltype(less_urgent)> heap(less_urgent);
  for (const auto& [key, count] : pair_counts) {
    heap.push({count, static_cast<int32_t>(key >> 32), static_cast<int32_t>(key & 0xffffffffu)});
  }

  const auto target = static_cast<size_t>(vocab_size_ - 1);
  std::vector<uint64_t> grown;  // pairs holding the new token, whose counts may have increased
  while (result.tokens.size() < target && !heap.empty()) {
    const HeapEntry top = heap.top();
    heap.pop();
    const uint64_t key = pair_key(top.left, top.right);
    const int64_t current = pair_counts[key];
    if (current != top.count) {  // stale: counts of a pair only fall, except via `grown` below
      if (current > 0) heap.push({current, top.left, top.right});
      continue;
    }
    if (current <= 0) continue;

    // The new token; a text already in the vocabulary (reached by another pair) keeps its id.
    std::string text = tokens[static_cast<size_t>(top.left)] + tokens[static_cast<size_t>(top.right)];
    auto [it, inserted] = token_ids.emplace(text, static_cast<int32_t>(result.tokens.size()));
    const int32_t merged = it->second;
    if (inserted) result.tokens.push_back(std::move(text));
    result.merges.emplace_back(top.left, top.right);

    std::vector<int32_t> touched = std::move(pair_words[key]);
    pair_words.erase(key);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    grown.clear();
    for (const int32_t w : touched) {
      std::vector<int32_t>& symbols = words[static_cast<size_t>(w)];
      const int64_t count = counts[static_cast<size_t>(w)];
      bool holds = false;
      for (size_t i = 0; i + 1 < symbols.size() && !holds; ++i) {
        holds = symbols[i] == top.left && symbols[i + 1] == top.right;
      }
      if (!holds) continue;
      // Words are short: take the word's pairs out, merge, put its pairs back.
      for (size_t i = 0; i + 1 < symbols.size(); ++i) pair_counts[pair_key(symbols[i], symbols[i + 1])] -= count;
      merge_word(symbols, top.left, top.right, merged);
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const uint64_t k = pair_key(symbols[i], symbols[i + 1]);
        pair_counts[k] += count;
        if (symbols[i] == merged || symbols[i + 1] == merged) {
          pair_words[k].push_back(w);
          grown.push_back(k);
        }
      }
    }
    std::sort(grown.begin(), grown.end());
    grown.erase(std::unique(grown.begin(), grown.end()), grown.end());
    for (const uint64_t k : grown) {
      heap.push({pair_counts[k], static_cast<int32_t>(k >> 32), static_cast<int32_t>(k & 0xffffffffu)});
    }
  }
  return result;
}

std::string TrainedBpe::tokenizer_json() const {
  const ordered_json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
  ordered_json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  root["added_tokens"] = ordered_json::array({ordered_json{{"id", special_id()},
                                                           {"content", kTrainSpecialToken},
                                                           {"single_word", false},
                                                           {"lstrip", false},
                                                           {"rstrip", false},
                                                           {"normalized", false},
                                                           {"special", true}}});
  root["normalizer"] = {{"type", "NFC"}};
  root["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       ordered_json::array({ordered_json{{"type", "Split"},
                                         {"pattern", {{"Regex", kQwen3SplitPattern}}},
                                         {"behavior", "Isolated"},
                                         {"invert", false}},
                            byte_level})}};
  root["post_processor"] = byte_level;
  root["decoder"] = byte_level;
  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < tokens.size(); ++id) vocab[tokens[id]] = static_cast<int32_t>(id);
  ordered_json merge_list = ordered_json::array();
  for (const auto& [left, right] : merges) {
    merge_list.push_back({tokens[static_cast<size_t>(left)], tokens[static_cast<size_t>(right)]});
  }
  root["model"] = {{"type", "BPE"},
                   {"dropout", nullptr},
                   {"unk_token", nullptr},
                   {"continuing_subword_prefix", ""},
                   {"end_of_word_suffix", ""},
                   {"fuse_unk", false},
                   {"byte_fallback", false},
                   {"ignore_merges", false},
                   {"vocab", std::move(vocab)},
                   {"merges", std::move(merge_list)}};
  return root.dump(2) + "\n";
}

std::string TrainedBpe::tokenizer_config_json(int64_t model_max_length) const {
  ordered_json special = {{"content", kTrainSpecialToken}, {"lstrip", false},  {"normalized", false},
                          {"rstrip", false},               {"single_word", false}, {"special", true}};
  ordered_json root;
  root["add_bos_token"] = false;
  root["add_prefix_space"] = false;
  root["added_tokens_decoder"] = {{std::to_string(special_id()), std::move(special)}};
  root["bos_token"] = nullptr;
  root["clean_up_tokenization_spaces"] = false;
  root["eos_token"] = kTrainSpecialToken;
  root["errors"] = "replace";
  root["model_max_length"] = model_max_length;
  root["pad_token"] = kTrainSpecialToken;
  root["split_special_tokens"] = false;
  root["tokenizer_class"] = "PreTrainedTokenizerFast";
  root["unk_token"] = nullptr;
  return root.dump(2) + "\n";
}

}  // namespace titan::data
