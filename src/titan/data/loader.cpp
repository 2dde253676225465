#include "titan/data/loader.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "titan/core/crc32c.h"

#include "titan/core/error.h"
#include "titan/core/log.h"

namespace titan::data {

using nlohmann::json;

std::string LoaderState::to_json() const {
  json j = {{"epoch", epoch},
            {"file_index", position.file_index},
            {"byte_offset", position.byte_offset},
            {"line", position.line},
            {"doc_index", doc_index},
            {"documents_seen", documents_seen},
            {"carry_tokens", carry_tokens},
            {"rank", rank},
            {"world", world},
            {"dataset", dataset},
            {"geometry", geometry}};
  if (replay_from) {
    const StreamCursor& r = *replay_from;
    j["replay"] = {{"file_index", r.position.file_index}, {"byte_offset", r.position.byte_offset},
                   {"line", r.position.line},           {"epoch", r.epoch},
                   {"doc_index", r.doc_index},          {"documents_seen", r.documents_seen},
                   {"skip", replay_skip}};
  }
  if (!carry.empty()) {  // tokens of an old-format state, still carried
    std::string mask_text(carry_mask.size(), '1');
    for (size_t k = 0; k < carry_mask.size(); ++k) mask_text[k] = carry_mask[k] ? '1' : '0';
    j["carry"] = carry;
    j["carry_mask"] = mask_text;
  }
  return j.dump();
}

LoaderState LoaderState::from_json(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  TITAN_CHECK(!j.is_discarded() && j.is_object(),
              "[data] loader state: not a JSON object. HINT: pass what LoaderState::to_json wrote.");
  auto integer = [&](const char* field) -> int64_t {
    auto it = j.find(field);
    TITAN_CHECK(it != j.end() && it->is_number_integer(), "[data] loader state: field \"", field,
                "\" is missing or not an integer. HINT: pass what LoaderState::to_json wrote.");
    return it->get<int64_t>();
  };
  LoaderState s;
  s.epoch = integer("epoch");
  s.position = SourcePosition{integer("file_index"), integer("byte_offset"), integer("line")};
  s.doc_index = integer("doc_index");
  s.documents_seen = integer("documents_seen");
  s.rank = static_cast<int>(integer("rank"));
  s.world = static_cast<int>(integer("world"));
  auto replay = j.find("replay");
  if (replay != j.end()) {
    TITAN_CHECK(replay->is_object(), "[data] loader state: field \"replay\" is not an object. HINT: pass what "
                "LoaderState::to_json wrote.");
    auto field = [&](const char* name) -> int64_t {
      auto it = replay->find(name);
      TITAN_CHECK(it != replay->end() && it->is_number_integer() && it->get<int64_t>() >= 0, "[data] loader state: "
                  "\"replay\" field \"", name, "\" is missing or not a non-negative integer. HINT: pass what "
                  "LoaderState::to_json wrote.");
      return it->get<int64_t>();
    };
    s.replay_from = StreamCursor{SourcePosition{field("file_index"), field("byte_offset"), field("line")},
                                 field("epoch"), field("doc_index"), field("documents_seen")};
    s.replay_skip = field("skip");
  }
  auto carry = j.find("carry");
  TITAN_CHECK(carry != j.end() || replay != j.end() || j.contains("carry_tokens"), "[data] loader state: neither "
              "\"replay\" nor \"carry\" is there. HINT: pass what LoaderState::to_json wrote.");
  if (carry != j.end()) {
    TITAN_CHECK(carry->is_array(), "[data] loader state: field \"carry\" is not an array. HINT: pass what "
                "LoaderState::to_json wrote.");
    for (const auto& id : *carry) {
      TITAN_CHECK(id.is_number_integer(), "[data] loader state: \"carry\" holds a non-integer");
      s.carry.push_back(id.get<int32_t>());
    }
  }
  s.carry_tokens = j.contains("carry_tokens") ? integer("carry_tokens") : static_cast<int64_t>(s.carry.size());
  for (auto [field, target] : {std::pair<const char*, std::string*>{"dataset", &s.dataset}, {"geometry", &s.geometry}}) {
    auto it = j.find(field);  // absent in states written before the check: not checked
    if (it == j.end()) continue;
    TITAN_CHECK(it->is_string(), "[data] loader state: field \"", field, "\" is not a string. HINT: pass what "
                "LoaderState::to_json wrote.");
    *target = it->get<std::string>();
  }
  auto mask = j.find("carry_mask");  // absent in states written before chat data: every label counts
  if (mask == j.end()) {
    s.carry_mask.assign(s.carry.size(), 1);
    return s;
  }
  TITAN_CHECK(mask->is_string() && mask->get<std::string>().size() == s.carry.size() &&
                  mask->get<std::string>().find_first_not_of("01") == std::string::npos,
              "[data] loader state: \"carry_mask\" must be a string of ", s.carry.size(),
              " '0'/'1' characters (one per carried token). HINT: pass what LoaderState::to_json wrote.");
  for (char c : mask->get<std::string>()) s.carry_mask.push_back(c == '1');
  return s;
}

Loader::Loader(LoaderConfig config, const Tokenizer& tokenizer)
    : config_(std::move(config)), tokenizer_(&tokenizer), source_(config_.dataset) {
  const LoaderConfig& c = config_;
  const int64_t vocab = tokenizer.vocab_size();
  TITAN_CHECK(c.batch_size >= 1 && c.seq_len >= 1, "[data] loader: batch_size ", c.batch_size,
              " and seq_len ", c.seq_len, " must both be >= 1");
  TITAN_CHECK(c.eot_id >= 0 && c.eot_id < vocab, "[data] loader: eot_id ", c.eot_id,
              " is not a token id (vocabulary ", vocab, "). HINT: use tokenizer.token_id(\"<|endoftext|>\").");
  for (const auto* list : {&c.doc_prefix, &c.doc_suffix}) {
    for (const int32_t id : *list) {
      TITAN_CHECK(id >= 0 && id < vocab, "[data] loader: special token id ", id, " is not a token id (vocabulary ",
                  vocab, ")");
    }
  }
  TITAN_CHECK(c.world >= 1 && c.rank >= 0 && c.rank < c.world, "[data] loader: rank ", c.rank,
              " of world ", c.world, " is out of range");
  TITAN_CHECK(source_.format() != "chat" || c.chat != nullptr, "[data] loader: ", c.dataset.path, " holds chat data and "
              "there is no chat template to render it. HINT: use a tokenizer folder whose tokenizer_config.json has a "
              "chat_template (or a chat_template.jinja), or set training.dataset_format text");
  identity_ = dataset_identity(source_.files(), c.dataset.format);
}

// The files, their sizes and a CRC of each one's first 64 KiB: cheap, and it tells a dataset
// swapped under a checkpoint from the one it was reading (an append keeps the head but not the size).
std::string dataset_identity(const std::vector<std::string>& files, const std::string& format) {
  uint32_t crc = 0;
  int64_t bytes = 0;
  std::vector<char> head(64 * 1024);
  for (const std::string& f : files) {
    std::error_code ec;
    bytes += static_cast<int64_t>(std::filesystem::file_size(f, ec));
    std::ifstream in(f, std::ios::binary);
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    crc = crc32c(f.data(), f.size(), crc32c(head.data(), static_cast<size_t>(in.gcount()), crc));
  }
  char hex[16];
  std::snprintf(hex, sizeof(hex), "%08x", crc);
  return str(files.size(), " file(s) from ", files.empty() ? std::string("-") : files.front(), ", ", bytes,
             " bytes, ", format, ", head crc ", hex);
}

Loader::Step Loader::advance(bool quiet) {
  const StreamCursor before = cursor();
  std::optional<Document> doc = source_.next();
  if (!doc) {
    if (!config_.infinite) return Step::end;
    // Each document adds at least its eot, so an epoch that gives this rank one document ends
    // any fill; one that gives it none would spin forever.
    TITAN_CHECK(doc_index_ > config_.rank, "[data] ", config_.dataset.path, ": an epoch holds ",
                doc_index_, " documents, none for rank ", config_.rank, " of ", config_.world,
                ". HINT: use more data or fewer data-parallel ranks.");
    ++epoch_;
    doc_index_ = 0;
    source_.rewind();
    if (!quiet) log_info(str("[data] epoch ", epoch_ + 1));
    return Step::new_epoch;
  }
  const int64_t index = doc_index_++;
  if (index % config_.world != config_.rank) return Step::skipped;
  const size_t carried = carry_.size();
  const bool chat = source_.format() == "chat";
  if (chat) {
    append_chat(*doc);
  } else if (source_.format() == "pretokenized") {
    // The row's ids as they are (the folder's special tokens are the writer's to add), each checked.
    const int64_t vocab = tokenizer_->vocab_size();
    for (const int32_t id : doc->ids) {
      TITAN_CHECK(id < vocab, "[data] ", doc->where, ": token id ", id, " is outside the model's vocabulary of ", vocab,
                  ". HINT: the data was tokenized for another model; tokenize it with this model's tokenizer");
    }
    carry_.insert(carry_.end(), doc->ids.begin(), doc->ids.end());
    if (doc->mask.empty()) {
      carry_mask_.resize(carry_.size(), 1);
    } else {
      carry_mask_.insert(carry_mask_.end(), doc->mask.begin(), doc->mask.end());
    }
  } else {
    // One document = one encoded sequence: the folder's special tokens around it, as HF's
    // encode(add_special_tokens=True) gives them (BOS at each document start for Llama).
    carry_.insert(carry_.end(), config_.doc_prefix.begin(), config_.doc_prefix.end());
    const std::vector<int32_t> ids = tokenizer_->encode(doc->text);
    carry_.insert(carry_.end(), ids.begin(), ids.end());
    carry_.insert(carry_.end(), config_.doc_suffix.begin(), config_.doc_suffix.end());
    carry_mask_.resize(carry_.size(), 1);
  }
  // The separator, unless the document already ends with it (the suffix's add_eos_token, or a
  // pretokenized row's own eos). Outside the loss where labels mask the document.
  const bool ends_in_eot = carry_.size() > carried && carry_.back() == config_.eot_id &&
                           (source_.format() == "pretokenized" || !config_.doc_suffix.empty());
  if (chat || !ends_in_eot) {
    carry_.push_back(config_.eot_id);
    const bool masked = (chat && config_.mask_non_assistant) || !doc->mask.empty();
    carry_mask_.push_back(masked ? 0 : 1);
  }
  ++documents_seen_;
  carried_docs_.push_back({before, static_cast<int64_t>(carry_.size() - carried)});
  return Step::document;
}

bool Loader::fill(size_t want) {
  // Epochs started inside this call, and the carry's size at the first: a batch larger than an
  // epoch repeats the dataset, which overfitting a few lines may want; thousands of repeats a batch
  // (an absurd local_batch_size or seq_len) are refused instead of cycling for minutes.
  constexpr int kMaxEpochsPerBatch = 100;
  int wraps = 0;
  size_t at_first_wrap = 0;
  while (carry_.size() < want) {
    const Step step = advance();
    if (step == Step::end) return false;
    if (step != Step::new_epoch) continue;
    if (++wraps == 1) {
      at_first_wrap = carry_.size();
      continue;
    }
    const size_t per_epoch = (carry_.size() - at_first_wrap) / static_cast<size_t>(wraps - 1);
    if (wraps == 2 && !warned_small_epoch_) {
      warned_small_epoch_ = true;
      log_warn(str("[data] ", config_.dataset.path, ": an epoch gives this rank ", per_epoch,
                   " tokens, fewer than one batch (", want, "): every batch repeats the dataset"));
    }
    TITAN_CHECK(wraps <= kMaxEpochsPerBatch, "[data] ", config_.dataset.path, ": an epoch gives this rank ",
                per_epoch, " tokens and one batch needs ", want, " (", config_.batch_size, " x ",
                config_.seq_len + 1, "): more than ", kMaxEpochsPerBatch,
                " passes over the dataset per batch. HINT: lower training.local_batch_size or "
                "training.seq_len, or use more data");
  }
  return true;
}

void Loader::drop_front(size_t n) {
  carry_.erase(carry_.begin(), carry_.begin() + static_cast<std::ptrdiff_t>(n));
  carry_mask_.erase(carry_mask_.begin(), carry_mask_.begin() + static_cast<std::ptrdiff_t>(n));
  head_skip_ += static_cast<int64_t>(n);
  while (!carried_docs_.empty() && head_skip_ >= carried_docs_.front().tokens) {
    head_skip_ -= carried_docs_.front().tokens;
    carried_docs_.pop_front();
  }
}

void Loader::append_chat(const Document& doc) {
  ChatTokens ct;
  try {
    ct = encode_chat(*config_.chat, *tokenizer_, doc.messages, config_.mask_non_assistant);
  } catch (const Error& e) {  // a template's raise_exception, say: name the line it came from
    TITAN_FAIL("[data] ", doc.where, ": ", e.what());
  }
  carry_.insert(carry_.end(), ct.ids.begin(), ct.ids.end());
  carry_mask_.insert(carry_mask_.end(), ct.mask.begin(), ct.mask.end());
}

std::optional<Batch> Loader::next() {
  const auto start = std::chrono::steady_clock::now();
  const int64_t B = config_.batch_size, T = config_.seq_len;
  const size_t want = static_cast<size_t>(B * (T + 1));
  if (!fill(want)) {
    seconds_in_next_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return std::nullopt;
  }
  Batch batch{Tensor::empty({B, T}, DType::i64), Tensor::empty({B, T}, DType::i64),
              Tensor::empty({B, T}, DType::i64)};
  int64_t* inputs = batch.inputs_BT.data<int64_t>();
  int64_t* labels = batch.labels_BT.data<int64_t>();
  int64_t* positions = batch.positions_BT.data<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    const int32_t* row = carry_.data() + b * (T + 1);  // T+1 tokens: inputs and labels overlap by T
    const uint8_t* row_mask = carry_mask_.data() + b * (T + 1);
    int64_t pos = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (t > 0) pos = config_.document_positions && row[t - 1] == config_.eot_id ? 0 : pos + 1;
      inputs[b * T + t] = row[t];
      labels[b * T + t] = row_mask[t + 1] ? row[t + 1] : kIgnoreLabel;
      positions[b * T + t] = pos;
    }
  }
  drop_front(want);
  tokens_emitted_ += B * T;
  seconds_in_next_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return batch;
}

LoaderState Loader::state() const {
  LoaderState s;
  s.epoch = epoch_;
  s.position = source_.position();
  s.doc_index = doc_index_;
  s.documents_seen = documents_seen_;
  s.carry_tokens = static_cast<int64_t>(carry_.size());
  if (!carried_docs_.empty() && carried_docs_.front().start) {
    s.replay_from = carried_docs_.front().start;
    s.replay_skip = head_skip_;
  } else if (!carried_docs_.empty()) {  // an old-format state's tokens are still carried: keep the format
    s.carry = carry_;
    s.carry_mask = carry_mask_;
  }
  s.rank = config_.rank;
  s.world = config_.world;
  s.dataset = identity_;
  s.geometry = geometry();
  return s;
}

std::string Loader::geometry() const { return str("batch ", config_.batch_size, " x ", config_.seq_len); }

void Loader::restore(const LoaderState& state) {
  TITAN_CHECK(state.rank == config_.rank && state.world == config_.world, "[data] loader state: saved by "
              "rank ", state.rank, " of ", state.world, ", restored on rank ", config_.rank, " of ",
              config_.world, ". HINT: resume with the same data-parallel layout.");
  if (!state.dataset.empty() && state.dataset != identity_) {
    log_warn(str("[data] the checkpoint was reading another dataset (", state.dataset, "; now ", identity_,
                 "): this one starts from its beginning, and the old one's buffered tokens are dropped"));
    documents_seen_ = state.documents_seen;
    return;  // a fresh cursor: epoch 0, the first document, nothing carried
  }
  if (!state.geometry.empty() && state.geometry != geometry()) {
    log_warn(str("[data] the batch geometry changed since the checkpoint (", state.geometry, " -> ", geometry(),
                 "): the data continues where it stopped, but the batches differ from an uninterrupted run"));
  }
  carry_.clear();
  carry_mask_.clear();
  carried_docs_.clear();
  head_skip_ = 0;
  if (state.replay_from) {
    replay(state);
  } else {
    TITAN_CHECK(state.carry_mask.size() == state.carry.size(), "[data] loader state: ", state.carry_mask.size(),
                " mask bits for ", state.carry.size(), " carried tokens. HINT: pass what LoaderState::to_json wrote.");
    carry_ = state.carry;
    carry_mask_ = state.carry_mask;
    if (!carry_.empty()) carried_docs_.push_back({std::nullopt, static_cast<int64_t>(carry_.size())});
  }
  source_.seek(state.position);
  epoch_ = state.epoch;
  doc_index_ = state.doc_index;
  documents_seen_ = state.documents_seen;
}

// Reads from the replay cursor to the saved one, tokenizing this rank's documents as the original
// did, then drops the tokens it had emitted: carry_ is then the original's, token for token.
void Loader::replay(const LoaderState& state) {
  const StreamCursor& from = *state.replay_from;
  const StreamCursor to{state.position, state.epoch, state.doc_index, state.documents_seen};
  source_.seek(from.position);
  epoch_ = from.epoch;
  doc_index_ = from.doc_index;
  documents_seen_ = from.documents_seen;
  const char* hint = ". HINT: the dataset changed since the checkpoint; restore the files it was saved with";
  while (!(cursor() == to)) {
    TITAN_CHECK(epoch_ <= to.epoch, "[data] loader state: re-reading ", config_.dataset.path, " from epoch ",
                from.epoch + 1, " did not reach the saved position (file ", to.position.file_index, ", byte ",
                to.position.byte_offset, ", epoch ", to.epoch + 1, ")", hint);
    TITAN_CHECK(advance(/*quiet=*/true) != Step::end, "[data] loader state: ", config_.dataset.path,
                " ended before the saved position", hint);
  }
  const int64_t rebuilt = static_cast<int64_t>(carry_.size()) - state.replay_skip;
  TITAN_CHECK(rebuilt == state.carry_tokens && documents_seen_ == to.documents_seen, "[data] loader state: re-reading ",
              config_.dataset.path, " gave ", rebuilt, " carried tokens, the checkpoint had ", state.carry_tokens, hint);
  head_skip_ = 0;
  drop_front(static_cast<size_t>(state.replay_skip));
}

double Loader::tokens_per_second() const {
  return seconds_in_next_ > 0 ? static_cast<double>(tokens_emitted_) / seconds_in_next_ : 0.0;
}

}  // namespace titan::data
