#include "titan/data/tokenizer/bpe.h"

#include <functional>
#include <queue>

#include "titan/data/tokenizer/unicode.h"

namespace titan::data {
namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

}  // namespace

Bpe::Bpe(std::unordered_map<std::string, int32_t> vocab, const std::vector<Merge>& merges, bool ignore_merges)
    : vocab_(std::move(vocab)), ignore_merges_(ignore_merges) {
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

void Bpe::merge_word(std::string_view piece, std::vector<int32_t>& out) const {
  const ByteLevelMap& map = byte_level_map();
  if (ignore_merges_) {
    std::string mapped;
    for (const char c : piece) mapped += map.byte_to_utf8[static_cast<unsigned char>(c)];
    const auto it = vocab_.find(mapped);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Symbols in a doubly linked list; a merged-away symbol gets id -1.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
  };
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (const char c : piece) {
    // A byte without a token is dropped, as HF's BPE does when there is no unk_token.
    const int32_t id = byte_ids_[static_cast<unsigned char>(c)];
    if (id < 0) continue;
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
