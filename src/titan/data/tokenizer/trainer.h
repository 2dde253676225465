// Training a byte-level BPE tokenizer with Qwen3's pre-tokenizer, written as HF tokenizer.json.
//
// Text goes through what Tokenizer::encode runs before BPE: "<|endoftext|>" splits it (the special
// token is never learned in pieces), NFC, Qwen3's Split regex, ByteLevel. Each distinct piece is a
// word with a count. The vocabulary starts with the 256 byte-level symbols (ids 0..255 in GPT-2's
// byte order, i.e. sorted by their code point), then merges the most frequent adjacent pair of
// symbols until it holds vocab_size - 1 tokens; ties go to the smallest (left, right) pair of token
// texts (byte-wise), so a result depends only on the text, never on hash order. The special token
// takes the last id. When the corpus runs out of pairs first, the vocabulary is smaller.
//
// Pair counts are updated incrementally: a merge touches only the words that hold the pair (a
// pair -> words index), and a max-heap with lazy re-insertion picks the next pair.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace titan::data {

inline constexpr int64_t kMinTrainVocabSize = 257;      // 256 bytes + the special token
inline constexpr int64_t kMaxTrainVocabSize = 1 << 22;  // 4,194,304: far past any real tokenizer
inline constexpr std::string_view kTrainSpecialToken = "<|endoftext|>";
// Qwen3's Split pattern (tokenizer.json: pre_tokenizer.pretokenizers[0].pattern.Regex).
inline constexpr std::string_view kQwen3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct TrainedBpe {
  std::vector<std::string> tokens;                // id -> byte-level token text (BPE part only)
  std::vector<std::pair<int32_t, int32_t>> merges;  // in rank order
  int64_t num_words = 0;                          // distinct pre-tokenized pieces
  int64_t num_pieces = 0;                         // pre-tokenized pieces in all

  // The special token's id: one past the BPE vocabulary.
  int32_t special_id() const { return static_cast<int32_t>(tokens.size()); }
  // HF tokenizers' tokenizer.json (pretty-printed, keys in HF's order) and a tokenizer_config.json
  // for transformers' PreTrainedTokenizerFast with "<|endoftext|>" as eos and pad token.
  std::string tokenizer_json() const;
  std::string tokenizer_config_json(int64_t model_max_length) const;
};

class BpeTrainer {
 public:
  // Throws titan::Error when vocab_size is outside [kMinTrainVocabSize, kMaxTrainVocabSize].
  explicit BpeTrainer(int64_t vocab_size);
  ~BpeTrainer();
  BpeTrainer(const BpeTrainer&) = delete;
  BpeTrainer& operator=(const BpeTrainer&) = delete;

  // Counts the words of one document (valid UTF-8; `where` names it in the error otherwise).
  void add_text(std::string_view text, const std::string& where = "text");
  // Runs the merges over everything added so far.
  TrainedBpe train() const;

 private:
  struct Splitter;
  int64_t vocab_size_;
  std::unordered_map<std::string, int64_t> word_counts_;  // pre-tokenized piece (raw bytes) -> count
  int64_t num_pieces_ = 0;
  std::unique_ptr<Splitter> splitter_;  // the compiled pre-tokenizer
};

}  // namespace titan::data
