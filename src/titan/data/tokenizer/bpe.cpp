#include "titan/data/tokenizer/bpe.h"

#include <cstdio>
#include <functional>
#include <queue>

#include "titan/data/tokenizer/unicode.h"

namespace titan::data {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

Bpe::Bpe(std::unordered_map<std::string, int32_t> vocab, const std::vector<Merge>& merges, Options options)
    : vocab_(std::move(vocab)), options_(std::move(options)) {
  plain_bytes_ = options_.byte_level && !options_.byte_fallback && options_.unk_id < 0 &&
                 options_.continuing_subword_prefix.empty() && options_.end_of_word_suffix.empty();
  ranks_.reserve(merges.size() * 2);
  for (size_t i = 0; i < merges.size(); ++i) {
    ranks_.insert_or_assign(pair_key(merges[i].left, merges[i].right),
                            Rank{static_cast<uint32_t>(i), merges[i].merged});
  }
  const ByteLevelMap& map = byte_level_map();
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_.find(map.byte_to_utf8[b]);
    byte_ids_[b] = it == vocab_.end() ? -1 : it->second;
  }
}

void Bpe::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() > kCacheMaxPiece) {
    merge_word(piece, out);
    return;
  }
  const std::string key(piece);
  // High hash bits pick the shard; the map's buckets use the low ones.
  CacheShard& shard = cache_[(std::hash<std::string>{}(key) >> 32) % kCacheShards];
  {
    std::lock_guard<std::mutex> lock(shard.mutex);
    const auto it = shard.pieces.find(key);
    if (it != shard.pieces.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = out.size();
  merge_word(piece, out);
  std::lock_guard<std::mutex> lock(shard.mutex);
  if (shard.pieces.size() < kCacheMaxEntriesPerShard) {
    shard.pieces.emplace(key, std::vector<int32_t>(out.begin() + first, out.end()));
  }
}

void Bpe::initial_symbols(std::string_view piece, std::vector<int32_t>& ids) const {
  const ByteLevelMap& map = byte_level_map();
  int32_t unk = -1;  // a pending unk_token (HF adds it before the next known symbol)
  std::string s;
  for (size_t i = 0; i < piece.size();) {
    int len = 1;
    if (!options_.byte_level) utf8_decode(piece, i, len);
    const bool first = i == 0;
    const bool last = i + static_cast<size_t>(len) == piece.size();
    s.clear();
    if (!first) s += options_.continuing_subword_prefix;
    if (options_.byte_level) {
      s += map.byte_to_utf8[static_cast<unsigned char>(piece[i])];
    } else {
      s.append(piece.substr(i, static_cast<size_t>(len)));
    }
    if (last) s += options_.end_of_word_suffix;
    i += static_cast<size_t>(len);
    if (const auto it = vocab_.find(s); it != vocab_.end()) {
      if (unk >= 0) ids.push_back(unk);
      unk = -1;
      ids.push_back(it->second);
      continue;
    }
    if (options_.byte_fallback) {
      // Every byte of the symbol (prefix and suffix included, as HF) as <0xNN>, or none of them.
      const size_t mark = ids.size();
      bool all = true;
      for (const char c : s) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned>(static_cast<unsigned char>(c)));
        const auto it = vocab_.find(name);
        if (it == vocab_.end()) {
          all = false;
          break;
        }
        ids.push_back(it->second);
      }
      if (all) continue;  // HF leaves a pending unk pending here
      ids.resize(mark);
    }
    if (options_.unk_id >= 0) {
      if (unk >= 0 && !options_.fuse_unk) ids.push_back(unk);
      unk = options_.unk_id;
    }
  }
  if (unk >= 0) ids.push_back(unk);
}

void Bpe::merge_word(std::string_view piece, std::vector<int32_t>& out) const {
  const ByteLevelMap& map = byte_level_map();
  if (options_.ignore_merges) {
    std::string mapped;
    if (options_.byte_level) {
      for (const char c : piece) mapped += map.byte_to_utf8[static_cast<unsigned char>(c)];
    } else {
      mapped = piece;
    }
    const auto it = vocab_.find(mapped);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> ids;
  if (plain_bytes_) {
    ids.reserve(piece.size());
    for (const char c : piece) {
      // A byte without a token is dropped, as HF's BPE does when there is no unk_token.
      const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
      if (id >= 0) ids.push_back(id);
    }
  } else {
    initial_symbols(piece, ids);
  }
  // Symbols in a doubly linked list; a merged-away symbol gets id -1.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(ids.size());
  for (const int32_t id : ids) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, n - 1, n + 1});
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  struct Candidate {
    uint32_t rank;
    int32_t pos;
    int32_t merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push_pair = [&](int32_t pos) {
    const int32_t next = symbols[pos].next;
    if (next < 0) return;
    const auto it = ranks_.find(pair_key(symbols[pos].id, symbols[next].id));
    if (it != ranks_.end()) queue.push({it->second.rank, pos, it->second.merged});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.id < 0 || left.next < 0) continue;
    // The pair may have changed since it was queued: re-check it still merges into `merged`.
    const Symbol& right = symbols[left.next];
    const auto it = ranks_.find(pair_key(left.id, right.id));
    if (it == ranks_.end() || it->second.merged != top.merged || it->second.rank != top.rank) continue;
    const int32_t right_pos = left.next;
    left.id = top.merged;
    left.next = right.next;
    symbols[right_pos].id = -1;
    if (left.next >= 0) symbols[left.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  for (int32_t i = 0; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace titan::data
