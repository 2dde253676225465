// Loader: the packing data loader (as torchtitan does it). This rank's documents are tokenized,
// [bos] + encode(doc) + [eot] each, concatenated into one stream, and cut into rows of T+1 tokens;
// B rows make a batch. Tokens left over after a batch carry into the next one (and across epochs).
//
// Shape legend: B = batch_size rows, T = seq_len tokens per row.
//   inputs_BT    i64  row[:-1]
//   labels_BT    i64  row[1:]  (the next token of each input; -100 where masked, see chat data)
//   positions_BT i64  the tokens' positions, which travel in the batch to the model (RoPE, and the
//                     attention offsets of a chunk of the row): 0..T-1 per row, the packed row
//                     being one sequence. With document_positions, 0 also at each token that
//                     follows an eot: each document counts from 0, for document-causal use (read
//                     from the row alone, so no extra state; a document whose text holds a
//                     literal "<|endoftext|>" encodes to eot there and restarts too).
//
// Chat data (config.chat set, dataset.format "chat"): a document is a conversation, rendered by the
// chat template and encoded whole (encode_chat, chat_template.h), no bos (the template writes its
// own), then eot. Each token carries a mask bit: 1 for text documents, for chat tokens inside
// assistant spans (or every token when !mask_non_assistant); the appended eot is 0 under the mask.
// labels_BT is -100 where the label token's bit is 0, so the loss (and its target count) only
// sees assistant tokens. The mask travels with the carried tokens and in the state.
//
// Sharding: the documents of an epoch are numbered 0, 1, 2, ... in DocumentSource order; rank r of
// w takes those with index % w == r. Every rank reads every document (cheap next to tokenizing) but
// tokenizes only its own: disjoint, covering, and independent of timing.
//
// Resume: state() is a small cursor of fixed size (source position, epoch, counters, and where the
// carried tokens came from); a loader restored from it yields exactly the batches the original
// would have yielded next. The carried tokens are not stored: restore() re-reads from the start of
// the document the first of them came from (the replay cursor) up to the saved position and drops
// the tokens already emitted, so a checkpoint stays small whatever a document's size (tokenization
// is deterministic; states written before hold the tokens themselves, and still restore). When the data
// runs out, the next epoch starts from the first file (log "epoch N"), or, with infinite = false,
// next() returns nullopt. Tokenization runs on the calling thread; PrefetchLoader
// (prefetch_loader.h) runs it on a background thread, batches ahead, with the same stream and cursor.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "titan/core/tensor.h"
#include "titan/data/chat_template.h"
#include "titan/data/dataset.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

struct LoaderConfig {
  DatasetConfig dataset;
  int64_t batch_size = 1;         // B
  int64_t seq_len = 2048;         // T
  int32_t eot_id = -1;            // appended to every document, e.g. the id of <|endoftext|>
  std::vector<int32_t> doc_prefix;  // before every text document (the folder's BOS), not chat ones
  std::vector<int32_t> doc_suffix;  // after it, before eot_id (which it replaces when it ends in it)
  int rank = 0;                   // data-parallel rank and world size
  int world = 1;
  bool infinite = true;           // false: next() returns nullopt when the data runs out
  std::shared_ptr<const ChatTemplate> chat;  // needed for chat data (unused by other data)
  bool mask_non_assistant = true;            // chat: labels -100 outside assistant spans
  bool document_positions = false;           // positions restart after each eot (see above)
};

inline constexpr int64_t kIgnoreLabel = -100;  // a label the loss skips (ops::count_targets' ignore_index)

struct Batch {
  Tensor inputs_BT;
  Tensor labels_BT;
  Tensor positions_BT;
};

// A point of the document stream: where the next document starts and the counters there.
struct StreamCursor {
  SourcePosition position;
  int64_t epoch = 0;           // 0-based; the log names epoch + 1
  int64_t doc_index = 0;       // global index (all ranks) of the next document within the epoch
  int64_t documents_seen = 0;  // documents this rank has tokenized, all epochs

  bool operator==(const StreamCursor& o) const {
    return position.file_index == o.position.file_index && position.byte_offset == o.position.byte_offset &&
           position.line == o.position.line && epoch == o.epoch && doc_index == o.doc_index;
  }
};

struct LoaderState {
  int64_t epoch = 0;           // 0-based; the log names epoch + 1
  SourcePosition position;     // where the next document starts
  int64_t doc_index = 0;       // global index (all ranks) of that document within the epoch
  int64_t documents_seen = 0;  // documents this rank has tokenized, all epochs
  // The carried tokens (packed, not yet emitted): carry_tokens of them, rebuilt on restore by
  // reading from replay_from (the stream before the first one's document) up to the cursor above
  // and dropping the first replay_skip tokens. No replay_from: nothing carried.
  std::optional<StreamCursor> replay_from;
  int64_t replay_skip = 0;
  int64_t carry_tokens = 0;
  // States written before the replay cursor: the carried tokens themselves, and their label bits
  // (JSON "0101..."; absent = all 1). Read, and written only while such tokens are still carried.
  std::vector<int32_t> carry;
  std::vector<uint8_t> carry_mask;
  int rank = 0;                // checked on restore: a cursor belongs to one shard
  int world = 1;
  // What the cursor points into, checked on restore ("" in states written before: not checked):
  // the dataset's identity (its files, their sizes and a CRC of each one's first 64 KiB) and the
  // stream's geometry ("batch B x T"). Another dataset starts from its beginning with a warning
  // (a cursor into other files means nothing); another geometry continues with a warning.
  std::string dataset;
  std::string geometry;

  std::string to_json() const;
  static LoaderState from_json(std::string_view text);  // throws titan::Error naming the bad field
};

// LoaderState::dataset of `files` (DocumentSource::files()) read as `format`.
std::string dataset_identity(const std::vector<std::string>& files, const std::string& format);

class Loader {
 public:
  // `tokenizer` must outlive the loader. Throws for a bad config (B, T, eot, rank/world).
  Loader(LoaderConfig config, const Tokenizer& tokenizer);

  std::optional<Batch> next();

  LoaderState state() const;
  void restore(const LoaderState& state);  // throws if it was saved by another rank or world size

  int64_t tokens_emitted() const { return tokens_emitted_; }  // B*T per batch, since construction
  double tokens_per_second() const;  // tokens emitted / seconds spent inside next()
  int64_t num_bad_lines() const { return source_.num_bad_lines(); }

 private:
  // One step of the stream: the next document of this rank appended to carry_, another rank's
  // document passed over, a new epoch started, or the end of a finite pass.
  enum class Step { document, skipped, new_epoch, end };
  Step advance(bool quiet = false);
  bool fill(size_t want);  // tokenizes documents until carry_ holds `want` tokens; false at end
  StreamCursor cursor() const { return {source_.position(), epoch_, doc_index_, documents_seen_}; }
  void drop_front(size_t n);  // n emitted tokens off carry_, carry_mask_ and carried_docs_
  void replay(const LoaderState& state);  // rebuilds carry_ from state.replay_from
  std::string geometry() const;  // LoaderState::geometry of this loader
  void append_chat(const Document& doc);  // encode_chat into carry_ / carry_mask_

  LoaderConfig config_;
  const Tokenizer* tokenizer_;
  DocumentSource source_;
  int64_t epoch_ = 0;
  int64_t doc_index_ = 0;
  int64_t documents_seen_ = 0;
  bool warned_small_epoch_ = false;  // "every batch repeats the dataset", said once
  std::vector<int32_t> carry_;
  std::vector<uint8_t> carry_mask_;  // same size as carry_
  // The documents carry_ holds tokens of, in order: where each started and how many tokens it
  // put in; the first has had head_skip_ of them emitted already. A state restored with its
  // tokens (the old format) holds them as one entry with no start.
  struct CarriedDocument {
    std::optional<StreamCursor> start;
    int64_t tokens = 0;
  };
  std::deque<CarriedDocument> carried_docs_;
  int64_t head_skip_ = 0;
  std::string identity_;             // LoaderState::dataset of this loader's files
  int64_t tokens_emitted_ = 0;
  double seconds_in_next_ = 0.0;
};

}  // namespace titan::data
