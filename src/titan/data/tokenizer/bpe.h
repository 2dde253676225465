// The BPE model, as HF tokenizers' BPE: a piece becomes symbols, one per character, then adjacent
// symbols merge by rank, lowest first and leftmost on ties. Results for short pieces are cached.
// Byte-level layouts (a ByteLevel pre-tokenizer) give it raw bytes, each one character through
// GPT-2's byte map; other layouts (SentencePiece-converted) give it the characters themselves,
// with byte_fallback (<0xNN> tokens), unk_token / fuse_unk and the subword prefix / suffix.
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
  struct Options {
    bool byte_level = true;      // pieces are raw bytes to map through GPT-2's byte map
    bool ignore_merges = false;  // a piece that is itself a vocabulary entry maps to it directly
    bool byte_fallback = false;  // a character without a token becomes its bytes' <0xNN> tokens
    int32_t unk_id = -1;         // else it becomes unk_token (-1: it is dropped)
    bool fuse_unk = false;       // consecutive unknowns make one unk_token
    std::string continuing_subword_prefix;  // looked up on every symbol but the first
    std::string end_of_word_suffix;         // looked up on the last symbol
  };
  // `vocab`: token text -> id. `merges` in rank order (a later duplicate pair wins, as in HF).
  Bpe(std::unordered_map<std::string, int32_t> vocab, const std::vector<Merge>& merges, Options options);

  // Appends the ids of one pre-tokenized piece (raw bytes, before the byte map).
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  void merge_word(std::string_view piece, std::vector<int32_t>& out) const;
  // Symbol ids of a piece by HF's merge_word rules (characters, prefix/suffix, fallback, unk).
  void initial_symbols(std::string_view piece, std::vector<int32_t>& ids) const;

  struct Rank {
    uint32_t rank = 0;
    int32_t merged = 0;
  };
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Rank> ranks_;  // (left << 32 | right) -> rank, merged id
  std::array<int32_t, 256> byte_ids_{};       // id of each byte's single-character token, -1 if absent
  Options options_;
  bool plain_bytes_ = true;  // byte-level without prefix, suffix or unk: the byte_ids_ fast path

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
