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
  std::string mask_text(carry_mask.size(), '1');
  for (size_t k = 0; k < carry_mask.size(); ++k) mask_text[k] = carry_mask[k] ? '1' : '0';
  json j = {{"epoch", epoch},
            {"file_index", position.file_index},
            {"byte_offset", position.byte_offset},
            {"line", position.line},
            {"doc_index", doc_index},
            {"documents_seen", documents_seen},
            {"carry", carry},
            {"carry_mask", mask_text},
            {"rank", rank},
            {"world", world},
            {"dataset", dataset},
            {"geometry", geometry}};
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
  auto carry = j.find("carry");
  TITAN_CHECK(carry != j.end() && carry->is_array(), "[data] loader state: field \"carry\" is missing "
              "or not an array. HINT: pass what LoaderState::to_json wrote.");
  for (const auto& id : *carry) {
    TITAN_CHECK(id.is_number_integer(), "[data] loader state: \"carry\" holds a non-integer");
    s.carry.push_back(id.get<int32_t>());
  }
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
  TITAN_CHECK(!c.bos_id || (*c.bos_id >= 0 && *c.bos_id < vocab), "[data] loader: bos_id ",
              c.bos_id.value_or(0), " is not a token id (vocabulary ", vocab, ")");
  TITAN_CHECK(c.world >= 1 && c.rank >= 0 && c.rank < c.world, "[data] loader: rank ", c.rank,
              " of world ", c.world, " is out of range");
  TITAN_CHECK((c.dataset.format == "chat") == (c.chat != nullptr), "[data] loader: dataset format '", c.dataset.format,
              "' ", c.chat ? "with" : "without", " a chat template. HINT: chat data needs LoaderConfig::chat, text data none");
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

bool Loader::fill(size_t want) {
  // Epochs started inside this call, and the carry's size at the first: a batch larger than an
  // epoch repeats the dataset, which overfitting a few lines may want; thousands of repeats a batch
  // (an absurd local_batch_size or seq_len) are refused instead of cycling for minutes.
  constexpr int kMaxEpochsPerBatch = 100;
  int wraps = 0;
  size_t at_first_wrap = 0;
  while (carry_.size() < want) {
    std::optional<std::string> doc = source_.next();
    if (!doc) {
      if (!config_.infinite) return false;
      // Each document adds at least its eot, so an epoch that gives this rank one document ends
      // the loop; one that gives it none would spin forever.
      TITAN_CHECK(doc_index_ > config_.rank, "[data] ", config_.dataset.path, ": an epoch holds ",
                  doc_index_, " documents, none for rank ", config_.rank, " of ", config_.world,
                  ". HINT: use more data or fewer data-parallel ranks.");
      if (++wraps == 1) {
        at_first_wrap = carry_.size();
      } else {
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
      ++epoch_;
      doc_index_ = 0;
      source_.rewind();
      log_info(str("[data] epoch ", epoch_ + 1));
      continue;
    }
    const int64_t index = doc_index_++;
    if (index % config_.world != config_.rank) continue;
    if (config_.chat) {
      append_chat(*doc);
    } else {
      if (config_.bos_id) carry_.push_back(*config_.bos_id);
      const std::vector<int32_t> ids = tokenizer_->encode(*doc);
      carry_.insert(carry_.end(), ids.begin(), ids.end());
      carry_mask_.resize(carry_.size(), 1);
    }
    carry_.push_back(config_.eot_id);
    carry_mask_.push_back(config_.chat && config_.mask_non_assistant ? 0 : 1);
    ++documents_seen_;
  }
  return true;
}

void Loader::append_chat(const std::string& messages_json) {
  ChatTokens ct;
  try {
    ct = encode_chat(*config_.chat, *tokenizer_, nlohmann::ordered_json::parse(messages_json), config_.mask_non_assistant);
  } catch (const Error& e) {  // a template's raise_exception, say: name the line it came from
    const SourcePosition p = source_.position();
    const size_t f = static_cast<size_t>(p.file_index);
    TITAN_FAIL("[data] ", f < source_.files().size() ? source_.files()[f] : config_.dataset.path, ":", p.line, ": ",
               e.what());
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
      if (t > 0) pos = row[t - 1] == config_.eot_id ? 0 : pos + 1;
      inputs[b * T + t] = row[t];
      labels[b * T + t] = row_mask[t + 1] ? row[t + 1] : kIgnoreLabel;
      positions[b * T + t] = pos;
    }
  }
  carry_.erase(carry_.begin(), carry_.begin() + static_cast<std::ptrdiff_t>(want));
  carry_mask_.erase(carry_mask_.begin(), carry_mask_.begin() + static_cast<std::ptrdiff_t>(want));
  tokens_emitted_ += B * T;
  seconds_in_next_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return batch;
}

LoaderState Loader::state() const {
  return LoaderState{epoch_,  source_.position(), doc_index_, documents_seen_, carry_, carry_mask_,
                     config_.rank, config_.world, identity_, geometry()};
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
  source_.seek(state.position);
  epoch_ = state.epoch;
  doc_index_ = state.doc_index;
  documents_seen_ = state.documents_seen;
  TITAN_CHECK(state.carry_mask.size() == state.carry.size(), "[data] loader state: ", state.carry_mask.size(),
              " mask bits for ", state.carry.size(), " carried tokens. HINT: pass what LoaderState::to_json wrote.");
  carry_ = state.carry;
  carry_mask_ = state.carry_mask;
}

double Loader::tokens_per_second() const {
  return seconds_in_next_ > 0 ? static_cast<double>(tokens_emitted_) / seconds_in_next_ : 0.0;
}

}  // namespace titan::data
