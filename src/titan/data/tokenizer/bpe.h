// The BPE model over byte-level pieces: a piece's bytes become single-character symbols (through
// GPT-2's byte map), then adjacent symbols merge by rank, lowest first and leftmost on ties, as HF
// tokenizers' BPE does. Results for short pieces are cached.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace titan::data {

class Bpe {
 public:
  struct Merge {
    int32_t left = 0;
    int32_t right = 0;
    int32_t merged = 0;
  };
  // `vocab`: byte-level token text -> id. `merges` in rank order (a later duplicate pair wins, as in
  // HF). `ignore_merges`: a piece that is itself a vocabulary entry maps to it directly.
  Bpe(std::unordered_map<std::string, int32_t> vocab, const std::vector<Merge>& merges, bool ignore_merges);

  // Appends the ids of one pre-tokenized piece (raw bytes, before the byte map).
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  void merge_word(std::string_view piece, std::vector<int32_t>& out) const;

  struct Rank {
    uint32_t rank = 0;
    int32_t merged = 0;
  };
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Rank> ranks_;  // (left << 32 | right) -> rank, merged id
  std::array<int32_t, 256> byte_ids_{};       // id of each byte's single-character token, -1 if absent
  bool ignore_merges_ = false;

  // The piece cache is split into shards, each behind its own mutex, so that threads encoding at
  // once rarely wait on each other.
  static constexpr size_t kCacheMaxPiece = 64;  // bytes
  static constexpr size_t kCacheShards = 64;
  static constexpr size_t kCacheMaxEntriesPerShard = (1 << 18) / kCacheShards;
  struct CacheShard {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int32_t>> pieces;
  };
  mutable std::array<CacheShard, kCacheShards> cache_;
};

}  // namespace titan::data
