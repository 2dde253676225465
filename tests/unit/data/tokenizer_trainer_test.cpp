// BpeTrainer: the committed trained tokenizer.json gives HF's ids (fixtures from
// tools/check_trained_tokenizer.py), retraining reproduces that file byte for byte, the merges equal
// a naive recount-everything trainer's, hand-made corpora give the merges the math says, and errors.
#include "titan/data/tokenizer/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ops/op_harness.h"
#include "titan/core/error.h"
#include "titan/data/tokenizer/pre_tokenizer.h"
#include "titan/data/tokenizer/tokenizer.h"
#include "titan/data/tokenizer/unicode.h"

namespace titan::data {
namespace {

using nlohmann::json;
using titan::testing::source_path;

const std::string kTrainedDir = "tests/fixtures/tokenizer/trained";
const std::string kShakespeare = "../shared/assets/text/tinyshakespeare.txt";
const std::string kQwen3Json = "../shared/assets/qwen3-tokenizer/tokenizer.json";
constexpr int64_t kTrainedVocabSize = 1024;  // tests/fixtures/tokenizer/README.md

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

TrainedBpe train_on(const std::vector<std::string>& texts, int64_t vocab_size) {
  BpeTrainer trainer(vocab_size);
  for (const std::string& t : texts) trainer.add_text(t);
  return trainer.train();
}

using TextPair = std::pair<std::string, std::string>;

std::vector<TextPair> merge_texts(const TrainedBpe& bpe) {
  std::vector<TextPair> out;
  for (const auto& [l, r] : bpe.merges) {
    out.emplace_back(bpe.tokens[static_cast<size_t>(l)], bpe.tokens[static_cast<size_t>(r)]);
  }
  return out;
}

std::string bl(std::string_view raw) {  // raw bytes -> byte-level token text
  std::string out;
  for (const char c : raw) out += byte_level_map().byte_to_utf8[static_cast<unsigned char>(c)];
  return out;
}

TEST(TokenizerTrainer, CommittedTokenizerGivesHfIds) {
  const Tokenizer tok = Tokenizer::from_file(source_path(kTrainedDir));
  EXPECT_EQ(tok.vocab_size(), kTrainedVocabSize);
  EXPECT_EQ(tok.token_id("<|endoftext|>"), kTrainedVocabSize - 1);
  std::ifstream in(source_path("tests/fixtures/tokenizer/trained_cases.jsonl"));
  ASSERT_TRUE(in.good());
  std::string line;
  int num_cases = 0;
  while (std::getline(in, line)) {
    const json c = json::parse(line);
    const std::string text = c["text"].get<std::string>();
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tok.encode(text);
    EXPECT_EQ(got, want) << "case " << num_cases << ": " << text.substr(0, 80);
    EXPECT_EQ(tok.decode(want), c["decoded"].get<std::string>()) << "case " << num_cases;
    ++num_cases;
  }
  EXPECT_GE(num_cases, 90);
}

TEST(TokenizerTrainer, RetrainingReproducesTheCommittedFile) {
  const std::string corpus = read_text(source_path(kShakespeare));
  ASSERT_GT(corpus.size(), 1000000u);
  const std::string want = read_text(source_path(kTrainedDir + "/tokenizer.json"));
  const TrainedBpe bpe = train_on({corpus}, kTrainedVocabSize);
  EXPECT_EQ(static_cast<int64_t>(bpe.tokens.size()) + 1, kTrainedVocabSize);
  // Byte for byte: the file HF checked is exactly what the trainer writes.
  EXPECT_TRUE(bpe.tokenizer_json() == want) << "retrained tokenizer.json differs from " << kTrainedDir;
}

TEST(TokenizerTrainer, LayoutIsQwen3s) {
  const TrainedBpe bpe = train_on({"hello hello world"}, 300);
  const json ours = json::parse(bpe.tokenizer_json());
  const json qwen3 = json::parse(read_text(source_path(kQwen3Json)));
  for (const char* key : {"normalizer", "pre_tokenizer", "post_processor", "decoder"}) {
    EXPECT_EQ(ours[key], qwen3[key]) << key;
  }
  // The byte symbols: ids 0..255 as in Qwen3's (GPT-2's) vocabulary.
  std::map<int64_t, std::string> qwen3_ids;
  for (const auto& item : qwen3["model"]["vocab"].items()) {
    if (item.value().get<int64_t>() < 256) qwen3_ids[item.value().get<int64_t>()] = item.key();
  }
  ASSERT_EQ(qwen3_ids.size(), 256u);
  for (int64_t id = 0; id < 256; ++id) EXPECT_EQ(bpe.tokens[static_cast<size_t>(id)], qwen3_ids[id]) << id;
  ASSERT_EQ(ours["added_tokens"].size(), 1u);
  EXPECT_EQ(ours["added_tokens"][0]["content"], "<|endoftext|>");
  EXPECT_EQ(ours["added_tokens"][0]["id"], bpe.special_id());
  const json config = json::parse(bpe.tokenizer_config_json(4096));
  EXPECT_EQ(config["eos_token"], "<|endoftext|>");
  EXPECT_EQ(config["model_max_length"], 4096);
  EXPECT_TRUE(config["added_tokens_decoder"].contains(std::to_string(bpe.special_id())));
}

TEST(TokenizerTrainer, FirstMergeIsTheMostFrequentPair) {
  // "aaaa" and " aaaa": (a,a) 6 times, (Ġ,a) once; then (aa,aa) twice against (Ġ,aa) once.
  const TrainedBpe bpe = train_on({"aaaa aaaa"}, 259);
  EXPECT_EQ(merge_texts(bpe), (std::vector<TextPair>{{"a", "a"}, {"aa", "aa"}}));
  EXPECT_EQ(bpe.tokens.size(), 258u);
  EXPECT_EQ(bpe.tokens[256], "aa");
  EXPECT_EQ(bpe.tokens[257], "aaaa");
  EXPECT_EQ(bpe.special_id(), 258);
}

TEST(TokenizerTrainer, TiesGoToTheSmallestPairAndCountsUpdate) {
  // "ab" and " cd": three pairs seen once; "a" < "c" < "Ġ" byte-wise. Merging (c,d) turns (Ġ,c)
  // into (Ġ,cd), which only the incremental update can know about.
  const TrainedBpe bpe = train_on({"ab cd"}, 260);
  EXPECT_EQ(merge_texts(bpe), (std::vector<TextPair>{{"a", "b"}, {"c", "d"}, {bl(" "), "cd"}}));
}

TEST(TokenizerTrainer, SpecialTokenIsNeverLearned) {
  // Only special tokens: no pairs at all, so the vocabulary stops at the bytes.
  const TrainedBpe bpe = train_on({"<|endoftext|><|endoftext|>"}, 1000);
  EXPECT_TRUE(bpe.merges.empty());
  EXPECT_EQ(bpe.tokens.size(), 256u);
  // Around text, it splits the text: "x<|endoftext|>y" has no (x,<) or (>,y) pair.
  const TrainedBpe split = train_on({"xx<|endoftext|>yyy"}, 258);
  EXPECT_EQ(merge_texts(split), (std::vector<TextPair>{{"y", "y"}}));
}

// The textbook trainer: recount every pair of every word before each merge.
std::vector<TextPair> naive_merges(const std::vector<std::string>& texts, int64_t vocab_size) {
  std::vector<PreTokenizeStep> steps(2);
  steps[0].kind = PreTokenizeStep::Kind::split_isolated;
  steps[0].regex = std::make_shared<const Regex>(kQwen3SplitPattern, false, "test");
  steps[1].kind = PreTokenizeStep::Kind::byte_level;
  std::map<std::vector<std::string>, int64_t> words;
  for (const std::string& text : texts) {
    const std::string normalized = nfc(text);
    std::deque<std::string> arena;
    std::vector<std::string_view> pieces;
    pre_tokenize(steps, normalized, arena, pieces);
    for (std::string_view p : pieces) {
      std::vector<std::string> symbols;
      for (const char c : p) symbols.push_back(bl(std::string(1, c)));
      ++words[symbols];
    }
  }
  std::set<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.insert(bl(std::string(1, static_cast<char>(b))));
  std::vector<TextPair> merges;
  while (static_cast<int64_t>(vocab.size()) < vocab_size - 1) {
    std::map<TextPair, int64_t> counts;
    for (const auto& [symbols, n] : words) {
      for (size_t i = 0; i + 1 < symbols.size(); ++i) counts[{symbols[i], symbols[i + 1]}] += n;
    }
    if (counts.empty()) break;
    // Highest count; std::map order makes the first one found the smallest pair.
    auto best = counts.begin();
    for (auto it = counts.begin(); it != counts.end(); ++it) {
      if (it->second > best->second) best = it;
    }
    const TextPair pair = best->first;
    merges.push_back(pair);
    vocab.insert(pair.first + pair.second);
    std::map<std::vector<std::string>, int64_t> next;
    for (const auto& [symbols, n] : words) {
      std::vector<std::string> merged;
      for (size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == pair.first && symbols[i + 1] == pair.second) {
          merged.push_back(pair.first + pair.second);
          ++i;
        } else {
          merged.push_back(symbols[i]);
        }
      }
      next[merged] += n;
    }
    words.swap(next);
  }
  return merges;
}

TEST(TokenizerTrainer, MergesEqualANaiveRecountingTrainer) {
  const std::string shakespeare = read_text(source_path(kShakespeare));
  const std::vector<std::string> texts = {
      shakespeare.substr(0, 20000),
      "Съешь же ещё этих мягких французских булок, да выпей чаю. 東京都の天気は晴れです。中文文本。",
      "aaaaaaa bbbbbbbb aaaa\n\n\n   \t\t  1234 56789 don't WE'LL cafe\u0301 café 😀😀👍🏽",
  };
  const int64_t vocab_size = 500;
  const TrainedBpe bpe = train_on(texts, vocab_size);
  const std::vector<TextPair> want = naive_merges(texts, vocab_size);
  ASSERT_EQ(merge_texts(bpe).size(), want.size());
  const std::vector<TextPair> got = merge_texts(bpe);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got[i], want[i]) << "merge " << i;
  }
}

TEST(TokenizerTrainer, VocabularyProperties) {
  const std::string corpus = read_text(source_path(kShakespeare)).substr(0, 200000);
  const int64_t vocab_size = 700;
  const TrainedBpe bpe = train_on({corpus}, vocab_size);
  const std::string text = bpe.tokenizer_json();
  const json root = json::parse(text);
  EXPECT_EQ(static_cast<int64_t>(root["model"]["vocab"].size()) + 1, vocab_size);
  const Tokenizer tok = Tokenizer::from_json_text(text, "trained");
  EXPECT_EQ(tok.vocab_size(), vocab_size);
  std::set<int64_t> ids;
  for (const auto& item : root["model"]["vocab"].items()) ids.insert(item.value().get<int64_t>());
  EXPECT_EQ(static_cast<int64_t>(ids.size()), vocab_size - 1);  // distinct ids 0..N-2
  EXPECT_EQ(*ids.rbegin(), vocab_size - 2);
  for (const json& m : root["model"]["merges"]) {
    const std::string merged = m[0].get<std::string>() + m[1].get<std::string>();
    EXPECT_TRUE(root["model"]["vocab"].contains(merged)) << merged;
  }
  // Same input, same bytes; the order of documents does not change the counts either.
  EXPECT_EQ(train_on({corpus}, vocab_size).tokenizer_json(), text);
  EXPECT_EQ(train_on({corpus.substr(100000), corpus.substr(0, 100000)}, vocab_size).tokenizer_json(),
            train_on({corpus.substr(0, 100000), corpus.substr(100000)}, vocab_size).tokenizer_json());
  // Encoding the corpus and decoding gives it back.
  const std::string sample = corpus.substr(0, 5000);
  EXPECT_EQ(tok.decode(tok.encode(sample)), sample);
}

TEST(TokenizerTrainer, Errors) {
  const auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(message([] { BpeTrainer t(256); }).find("vocab size 256 is out of range"), std::string::npos);
  EXPECT_NE(message([] { BpeTrainer t(int64_t{1} << 40); }).find("out of range"), std::string::npos);
  EXPECT_NE(message([] { BpeTrainer t(-5); }).find("out of range"), std::string::npos);
  BpeTrainer trainer(300);
  EXPECT_NE(message([&] { trainer.add_text("ok \xff bad", "doc.txt"); }).find("doc.txt: invalid UTF-8 at byte 3"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::data
