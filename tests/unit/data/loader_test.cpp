// Loader: packing against the rule stated here (stream = for each doc [bos] + encode(doc) + [eot],
// cut into rows of T+1), labels = inputs shifted by one, positions restarting at document starts,
// sharding (disjoint + covering), resume bit for bit (mid-file, across epochs), and its errors.
#include "titan/data/loader.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <thread>

#include <nlohmann/json.hpp>

#include "titan/core/error.h"
#include "titan/core/log.h"
#include "titan/data/prefetch_loader.h"
#include "unit/data/data_test_util.h"

namespace titan::data {
namespace {

using testing::shakespeare;
using testing::TempDir;
using testing::write_file;

const Tokenizer& qwen3() {
  static const Tokenizer tok =
      Tokenizer::from_file(titan::testing::source_path("../shared/assets/qwen3-tokenizer/tokenizer.json"));
  return tok;
}
int32_t eot() { return qwen3().token_id("<|endoftext|>").value(); }

std::string jsonl(const std::vector<std::string>& docs) {
  std::string out;
  for (const auto& d : docs) out += nlohmann::json{{"text", d}}.dump() + "\n";
  return out;
}

std::vector<int64_t> values(const Tensor& t) {
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

// The expected token stream and, per token, whether it starts a document.
struct Stream {
  std::vector<int64_t> tokens;
  std::vector<bool> doc_start;
};
// `prefix` / `suffix`: the folder's special tokens around each document; a suffix that ends in
// eot ends the document (no second eot).
Stream pack(const std::vector<std::string>& docs, const std::vector<int32_t>& prefix = {},
            const std::vector<int32_t>& suffix = {}) {
  Stream s;
  for (const auto& d : docs) {
    s.doc_start.push_back(true);
    s.tokens.insert(s.tokens.end(), prefix.begin(), prefix.end());
    for (int32_t id : qwen3().encode(d)) s.tokens.push_back(id);
    s.tokens.insert(s.tokens.end(), suffix.begin(), suffix.end());
    if (suffix.empty() || suffix.back() != eot()) s.tokens.push_back(eot());
    s.doc_start.resize(s.tokens.size(), false);
  }
  return s;
}

LoaderConfig config_for(const std::string& path, int64_t B, int64_t T) {
  LoaderConfig c;
  c.dataset.path = path;
  c.batch_size = B;
  c.seq_len = T;
  c.eot_id = eot();
  return c;
}

// Checks every batch of a finite loader against `want`: row r of the whole run is
// want[r*(T+1), (r+1)*(T+1)), inputs/labels are its [:-1]/[1:], positions count from 0 at the row
// start (and, with document positions, at each document start). Returns the number of batches.
int64_t expect_packed(Loader& loader, const Stream& want, int64_t B, int64_t T, bool document_positions = false) {
  int64_t row = 0, batches = 0;
  while (auto batch = loader.next()) {
    ++batches;
    EXPECT_EQ(batch->inputs_BT.shape(), (Shape{B, T}));
    const auto in = values(batch->inputs_BT), lab = values(batch->labels_BT), pos = values(batch->positions_BT);
    for (int64_t b = 0; b < B; ++b, ++row) {
      const size_t base = static_cast<size_t>(row * (T + 1));
      EXPECT_LE(base + T + 1, want.tokens.size());
      if (base + T + 1 > want.tokens.size()) return batches;
      int64_t p = 0;
      for (int64_t t = 0; t < T; ++t) {
        const size_t i = static_cast<size_t>(b * T + t);
        p = (t == 0 || (document_positions && want.doc_start[base + t])) ? 0 : p + 1;
        EXPECT_EQ(in[i], want.tokens[base + t]) << "row " << row << " t " << t;
        EXPECT_EQ(lab[i], want.tokens[base + t + 1]) << "row " << row << " t " << t;
        EXPECT_EQ(pos[i], p) << "row " << row << " t " << t;
        if (t + 1 < T) {
          EXPECT_EQ(lab[i], in[i + 1]);  // labels are inputs shifted by one
        }
      }
    }
  }
  // Only a remainder shorter than one batch is left unemitted.
  EXPECT_LT(want.tokens.size() - static_cast<size_t>(row * (T + 1)), static_cast<size_t>(B * (T + 1)));
  return batches;
}

TEST(Loader, PacksDocumentsIntoRows) {
  TempDir dir;
  const auto docs = shakespeare(40);
  write_file(dir.file("s.jsonl"), jsonl(docs));
  for (const auto& [B, T] : std::vector<std::pair<int64_t, int64_t>>{{2, 16}, {3, 7}, {1, 64}}) {
    LoaderConfig c = config_for(dir.file("s.jsonl"), B, T);
    c.infinite = false;
    Loader loader(c, qwen3());
    const int64_t batches = expect_packed(loader, pack(docs), B, T);
    EXPECT_GT(batches, 2);
    EXPECT_EQ(loader.tokens_emitted(), batches * B * T);
    EXPECT_GT(loader.tokens_per_second(), 0.0);
    EXPECT_EQ(loader.state().documents_seen, 40);
  }
}

TEST(Loader, DocumentPositionsRestartAtEachDocument) {
  TempDir dir;
  const auto docs = shakespeare(40);
  write_file(dir.file("s.jsonl"), jsonl(docs));
  LoaderConfig c = config_for(dir.file("s.jsonl"), 2, 16);
  c.infinite = false;
  c.document_positions = true;
  Loader loader(c, qwen3());
  EXPECT_GT(expect_packed(loader, pack(docs), 2, 16, true), 2);
}

TEST(Loader, BosIsPrependedAndTextFilesSplitOnBlankLines) {
  TempDir dir;
  const auto docs = shakespeare(30);
  std::string text;
  for (const auto& d : docs) text += d + "\n\n";
  write_file(dir.file("s.txt"), text);
  LoaderConfig c = config_for(dir.file("s.txt"), 2, 24);
  c.dataset.split_blank_lines = true;
  c.doc_prefix = {qwen3().token_id("<|im_start|>").value()};
  c.infinite = false;
  {
    Loader loader(c, qwen3());
    EXPECT_GT(expect_packed(loader, pack(docs, c.doc_prefix), 2, 24), 2);
  }
  // A suffix (add_eos_token) goes after each document; one that is the eot is not doubled.
  for (const int32_t last : {qwen3().token_id("<|im_end|>").value(), eot()}) {
    c.doc_suffix = {qwen3().token_id("<|im_end|>").value(), last};
    Loader loader(c, qwen3());
    EXPECT_GT(expect_packed(loader, pack(docs, c.doc_prefix, c.doc_suffix), 2, 24), 2);
  }
}

TEST(Loader, ShardsAreDisjointAndCovering) {
  TempDir dir;
  const auto docs = shakespeare(42);
  // Two files: sharding numbers documents across file boundaries.
  write_file(dir.file("d/a.jsonl"), jsonl(std::vector<std::string>(docs.begin(), docs.begin() + 17)));
  write_file(dir.file("d/b.jsonl"), jsonl(std::vector<std::string>(docs.begin() + 17, docs.end())));
  int64_t seen = 0;
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<std::string> mine;
    for (size_t i = static_cast<size_t>(rank); i < docs.size(); i += 4) mine.push_back(docs[i]);
    LoaderConfig c = config_for(dir.file("d"), 1, 8);
    c.rank = rank;
    c.world = 4;
    c.infinite = false;
    Loader loader(c, qwen3());
    expect_packed(loader, pack(mine), 1, 8);
    EXPECT_EQ(loader.state().documents_seen, static_cast<int64_t>(mine.size()));
    seen += loader.state().documents_seen;
  }
  EXPECT_EQ(seen, 42);  // every document exactly once
}

// Runs k batches, saves, runs m more; a new loader restored from the JSON yields the same m.
// Returns the epoch at the save and at the end.
std::pair<int64_t, int64_t> expect_resume(const LoaderConfig& c, int k, int m) {
  Loader original(c, qwen3());
  for (int i = 0; i < k; ++i) EXPECT_TRUE(original.next());
  const std::string saved = original.state().to_json();
  std::vector<Batch> want;
  for (int i = 0; i < m; ++i) want.push_back(original.next().value());  // infinite: never ends

  Loader resumed(c, qwen3());
  resumed.restore(LoaderState::from_json(saved));
  for (int i = 0; i < m; ++i) {
    auto got = resumed.next();
    if (!got) {
      ADD_FAILURE() << "resumed loader ended at batch " << i;
      break;
    }
    EXPECT_EQ(values(got->inputs_BT), values(want[i].inputs_BT)) << "batch " << i;
    EXPECT_EQ(values(got->labels_BT), values(want[i].labels_BT)) << "batch " << i;
    EXPECT_EQ(values(got->positions_BT), values(want[i].positions_BT)) << "batch " << i;
  }
  EXPECT_EQ(resumed.state().to_json(), original.state().to_json());
  return {LoaderState::from_json(saved).epoch, original.state().epoch};
}

TEST(Loader, ResumeYieldsTheSameBatches) {
  set_log_level(LogLevel::warn);  // no "epoch N" lines in test output
  TempDir dir;
  const auto docs = shakespeare(24);  // a few hundred tokens: an epoch is a handful of batches
  write_file(dir.file("s.jsonl"), jsonl(docs));
  std::string text;
  for (const auto& d : docs) text += d + "\n\n";
  write_file(dir.file("t/part0.txt"), text.substr(0, text.size() / 2) + "\n\n");
  write_file(dir.file("t/part1.txt"), text.substr(text.size() / 2));

  LoaderConfig jsonl_c = config_for(dir.file("s.jsonl"), 2, 32);
  EXPECT_EQ(expect_resume(jsonl_c, 3, 2), (std::pair<int64_t, int64_t>{0, 0}));  // mid-file
  const auto [saved_epoch, end_epoch] = expect_resume(jsonl_c, 5, 12);
  EXPECT_GT(end_epoch, saved_epoch);                   // across an epoch boundary
  EXPECT_GE(expect_resume(jsonl_c, 40, 5).first, 2);   // saved in a later epoch
  LoaderConfig text_c = config_for(dir.file("t"), 3, 20);
  text_c.dataset.split_blank_lines = true;
  text_c.rank = 1;
  text_c.world = 2;
  EXPECT_GT(expect_resume(text_c, 2, 30).second, 1);

  Loader original(jsonl_c, qwen3());
  original.next();
  const LoaderState s = original.state();
  EXPECT_GT(s.position.byte_offset, 0);  // saved mid-file
  EXPECT_GT(s.carry_tokens, 0);
  ASSERT_TRUE(s.replay_from.has_value());  // the carried tokens are re-read, not stored
  EXPECT_TRUE(s.carry.empty());
  EXPECT_EQ(s.to_json().find("\"carry\""), std::string::npos);
  LoaderConfig other = jsonl_c;
  other.world = 2;
  Loader wrong(other, qwen3());
  EXPECT_THROW(wrong.restore(s), Error);
}

// A cursor saved on one dataset and restored on another (the same path rewritten with other
// text) does not seek into it: the new dataset starts from its beginning, batch for batch what a
// fresh loader gives. An older state without the identity resumes as before.
TEST(Loader, ADatasetChangedUnderACheckpointStartsFromItsBeginning) {
  set_log_level(LogLevel::error);
  TempDir dir;
  const auto docs = shakespeare(24);
  write_file(dir.file("s.jsonl"), jsonl(std::vector<std::string>(docs.begin(), docs.begin() + 12)));
  const LoaderConfig c = config_for(dir.file("s.jsonl"), 2, 32);
  Loader first(c, qwen3());
  first.next();
  first.next();
  const LoaderState s = first.state();
  EXPECT_NE(s.dataset.find("1 file(s) from " + dir.file("s.jsonl")), std::string::npos) << s.dataset;
  EXPECT_EQ(s.geometry, "batch 2 x 32");
  LoaderState old = s;  // as written before the identity existed
  old.dataset.clear();
  old.geometry.clear();
  Loader same(c, qwen3());
  same.restore(LoaderState::from_json(old.to_json()));
  EXPECT_EQ(values(same.next()->inputs_BT), values(first.next()->inputs_BT));

  write_file(dir.file("s.jsonl"), jsonl(std::vector<std::string>(docs.begin() + 12, docs.end())));
  Loader fresh(c, qwen3()), resumed(c, qwen3());
  resumed.restore(LoaderState::from_json(s.to_json()));
  EXPECT_NE(resumed.state().dataset, s.dataset);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(values(resumed.next()->inputs_BT), values(fresh.next()->inputs_BT)) << i;
  set_log_level(LogLevel::info);
}

// A document far longer than a batch (a 1.1 MB .txt file): the state stays a few hundred bytes
// while ~250k tokens are carried (they are re-read on restore), and the resumed loader gives the
// original's batches.
TEST(Loader, LongDocumentsKeepTheStateSmall) {
  TempDir dir;
  std::ifstream in(titan::testing::source_path("../shared/assets/text/tinyshakespeare.txt"), std::ios::binary);
  write_file(dir.file("big.txt"), std::string(std::istreambuf_iterator<char>(in), {}));
  const LoaderConfig c = config_for(dir.file("big.txt"), 2, 64);
  Loader original(c, qwen3());
  original.next();
  original.next();
  const LoaderState s = original.state();
  EXPECT_GT(s.carry_tokens, 200000);
  EXPECT_LT(s.to_json().size(), 1000u) << s.to_json();
  Loader resumed(c, qwen3());
  resumed.restore(LoaderState::from_json(s.to_json()));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(values(resumed.next()->inputs_BT), values(original.next()->inputs_BT)) << i;
  EXPECT_EQ(resumed.state().to_json(), original.state().to_json());
}

// A state in the old format (the carried tokens written out, no replay cursor) restores: its
// tokens come first, then the stream from its position; it keeps that format while any of them
// is still carried, and the replay cursor once they are gone.
TEST(Loader, OldFormatStatesStillRestore) {
  TempDir dir;
  write_file(dir.file("s.jsonl"), jsonl(shakespeare(12)));
  const LoaderConfig c = config_for(dir.file("s.jsonl"), 2, 32);
  Loader fresh(c, qwen3());
  LoaderState legacy = fresh.state();  // the stream's start, nothing carried
  legacy.carry = {11, 12, 13, 14, 15};
  legacy.carry_mask = {1, 1, 1, 1, 1};
  legacy.carry_tokens = 5;
  nlohmann::json j = nlohmann::json::parse(legacy.to_json());
  j.erase("carry_tokens");  // as the old writer left it
  Loader restored(c, qwen3());
  restored.restore(LoaderState::from_json(j.dump()));
  EXPECT_NE(restored.state().to_json().find("\"carry\":[11,12,13,14,15]"), std::string::npos);
  const std::vector<int64_t> got = values(restored.next()->inputs_BT), want = values(fresh.next()->inputs_BT);
  EXPECT_EQ(std::vector<int64_t>(got.begin(), got.begin() + 5), (std::vector<int64_t>{11, 12, 13, 14, 15}));
  EXPECT_EQ(std::vector<int64_t>(got.begin() + 5, got.begin() + 32),
            std::vector<int64_t>(want.begin(), want.begin() + 27));
  const LoaderState after = restored.state();
  EXPECT_TRUE(after.carry.empty());
  EXPECT_TRUE(after.replay_from.has_value());
}

TEST(Loader, FiniteStopsInfiniteWraps) {
  set_log_level(LogLevel::warn);
  TempDir dir;
  const auto docs = shakespeare(3);
  write_file(dir.file("s.jsonl"), jsonl(docs));
  const Stream one = pack(docs);
  const int64_t T = static_cast<int64_t>(one.tokens.size());  // one row = an epoch plus one token
  LoaderConfig c = config_for(dir.file("s.jsonl"), 1, T);
  c.infinite = false;
  EXPECT_FALSE(Loader(c, qwen3()).next());
  c.infinite = true;
  Loader loader(c, qwen3());
  auto batch = loader.next();
  ASSERT_TRUE(batch);
  EXPECT_EQ(values(batch->inputs_BT), one.tokens);
  EXPECT_EQ(values(batch->labels_BT).back(), one.tokens.front());  // the next epoch's first token
  EXPECT_EQ(loader.state().epoch, 1);
}

TEST(Loader, Errors) {
  TempDir dir;
  write_file(dir.file("bad.jsonl"), jsonl({"fine"}) + "{\"text\": 3}\n");
  Loader loader(config_for(dir.file("bad.jsonl"), 1, 4), qwen3());
  try {
    loader.next();
    ADD_FAILURE() << "no error for a bad line";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.jsonl:2:"), std::string::npos) << e.what();
  }
  LoaderConfig skip = config_for(dir.file("bad.jsonl"), 1, 4);
  skip.dataset.skip_bad_lines = true;
  skip.infinite = false;
  Loader skipping(skip, qwen3());
  while (skipping.next()) {
  }
  EXPECT_EQ(skipping.num_bad_lines(), 1);

  LoaderConfig lonely = config_for(dir.file("bad.jsonl"), 1, 4);
  lonely.dataset.skip_bad_lines = true;
  lonely.rank = 2;
  lonely.world = 3;  // one good document: ranks 1 and 2 never get one
  set_log_level(LogLevel::error);
  EXPECT_THROW(Loader(lonely, qwen3()).next(), Error);
  EXPECT_THROW(Loader(config_for(dir.file("missing"), 1, 4), qwen3()), Error);
  LoaderConfig no_eot = config_for(dir.file("bad.jsonl"), 1, 4);
  no_eot.eot_id = -1;
  EXPECT_THROW(Loader(no_eot, qwen3()), Error);
  EXPECT_THROW(LoaderState::from_json("{\"epoch\": 1}"), Error);
}

// PrefetchLoader: the same stream as Loader, batch for batch; a cursor that counts consumed batches
// only (while the producer runs ahead); producer errors re-thrown on the caller; a clean shutdown
// with a full queue.

void expect_same_batch(const Batch& got, const Batch& want, int i) {
  EXPECT_EQ(values(got.inputs_BT), values(want.inputs_BT)) << "batch " << i;
  EXPECT_EQ(values(got.labels_BT), values(want.labels_BT)) << "batch " << i;
  EXPECT_EQ(values(got.positions_BT), values(want.positions_BT)) << "batch " << i;
}

// Waits (polling, no timing asserted) until the producer has made `tokens`.
void wait_for_producer(const PrefetchLoader& p, int64_t tokens) {
  for (int i = 0; i < 20000 && p.tokens_emitted() < tokens; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(p.tokens_emitted(), tokens) << "the producer did not fill its queue";
}

TEST(PrefetchLoader, SameStreamAsLoader) {
  TempDir dir;
  write_file(dir.file("s.jsonl"), jsonl(shakespeare(40)));
  for (int64_t depth : {1, 2, 5}) {
    LoaderConfig c = config_for(dir.file("s.jsonl"), 2, 16);
    c.infinite = false;
    Loader plain(c, qwen3());
    PrefetchLoader prefetch(c, qwen3(), depth);
    int i = 0;
    for (;; ++i) {
      auto want = plain.next();
      auto got = prefetch.next();
      ASSERT_EQ(got.has_value(), want.has_value()) << "batch " << i << ", depth " << depth;
      if (!want) break;
      expect_same_batch(*got, *want, i);
      EXPECT_EQ(prefetch.state().to_json(), plain.state().to_json()) << "batch " << i;
    }
    EXPECT_GT(i, 2);
    EXPECT_FALSE(prefetch.next());  // stays at the end
    EXPECT_EQ(prefetch.state().to_json(), plain.state().to_json());
    EXPECT_EQ(prefetch.tokens_emitted(), plain.tokens_emitted());
    EXPECT_GT(prefetch.tokens_per_second(), 0.0);
    EXPECT_GE(prefetch.seconds_waiting(), 0.0);
  }

  // An epoch shorter than one row: nullopt at once, as Loader.
  write_file(dir.file("short.jsonl"), jsonl(shakespeare(1)));
  LoaderConfig c = config_for(dir.file("short.jsonl"), 1, 4096);
  c.infinite = false;
  EXPECT_FALSE(PrefetchLoader(c, qwen3()).next());
}

TEST(PrefetchLoader, StateCountsConsumedBatchesOnly) {
  set_log_level(LogLevel::warn);
  TempDir dir;
  write_file(dir.file("s.jsonl"), jsonl(shakespeare(24)));  // an epoch is a handful of batches
  const LoaderConfig c = config_for(dir.file("s.jsonl"), 2, 32);
  const int64_t depth = 3, B = 2, T = 32;
  for (int k : {0, 3, 7}) {
    Loader plain(c, qwen3());
    PrefetchLoader prefetch(c, qwen3(), depth);
    for (int i = 0; i < k; ++i) {
      expect_same_batch(prefetch.next().value(), plain.next().value(), i);
    }
    wait_for_producer(prefetch, (k + depth) * B * T);  // run ahead: depth batches queued
    const LoaderState saved = prefetch.state();
    EXPECT_EQ(saved.to_json(), plain.state().to_json()) << "k " << k;
    std::vector<Batch> want;
    for (int i = 0; i < 10; ++i) want.push_back(plain.next().value());  // crosses an epoch

    PrefetchLoader resumed(c, qwen3(), depth);
    resumed.next();  // somewhere else first
    resumed.restore(LoaderState::from_json(saved.to_json()));
    prefetch.restore(saved);  // the run-ahead loader itself, rewound to its consumed cursor
    for (int i = 0; i < 10; ++i) {
      expect_same_batch(resumed.next().value(), want[i], i);
      expect_same_batch(prefetch.next().value(), want[i], i);
    }
    EXPECT_EQ(resumed.state().to_json(), plain.state().to_json());
    EXPECT_GT(plain.state().epoch, 0);
  }

  // A cursor from another layout is refused, and the loader carries on where it was.
  LoaderConfig other = c;
  other.world = 2;
  Loader plain(c, qwen3());
  PrefetchLoader prefetch(c, qwen3());
  expect_same_batch(prefetch.next().value(), plain.next().value(), 0);
  EXPECT_THROW(prefetch.restore(Loader(other, qwen3()).state()), Error);
  expect_same_batch(prefetch.next().value(), plain.next().value(), 1);
}

TEST(PrefetchLoader, ProducerErrorsAreRethrown) {
  TempDir dir;
  write_file(dir.file("bad.jsonl"), jsonl(shakespeare(2)) + "{\"text\": \"unterminated\n" + jsonl({"later"}));
  const LoaderConfig c = config_for(dir.file("bad.jsonl"), 1, 4);
  std::string want;
  try {
    Loader plain(c, qwen3());
    while (plain.next()) {
    }
  } catch (const Error& e) {
    want = e.what();
  }
  EXPECT_NE(want.find("bad.jsonl:3:"), std::string::npos) << want;

  PrefetchLoader prefetch(c, qwen3());
  int batches = 0;
  try {
    while (prefetch.next()) ++batches;
    ADD_FAILURE() << "no error for a bad line";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), want);
  }
  EXPECT_GT(batches, 0);  // the batches before the bad line came first
  EXPECT_THROW(prefetch.next(), Error);  // and it stays failed
}

TEST(PrefetchLoader, DestroysWithAFullQueue) {
  TempDir dir;
  write_file(dir.file("s.jsonl"), jsonl(shakespeare(24)));
  const LoaderConfig c = config_for(dir.file("s.jsonl"), 2, 32);
  {
    PrefetchLoader never_read(c, qwen3(), 2);
    wait_for_producer(never_read, 2 * 2 * 32);  // queue full: the producer waits for room
  }  // must not hang
  { PrefetchLoader just_started(c, qwen3(), 1); }  // stopped while (maybe) mid-batch
  EXPECT_THROW(PrefetchLoader(c, qwen3(), 0), Error);
}

}  // namespace
}  // namespace titan::data
