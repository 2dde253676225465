// Tokenizer: ids and decode against HF tokenizers (fixtures from tools/make_tokenizer_fixtures.py),
// plus errors for malformed tokenizer.json files.
#include "titan/data/tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "ops/op_harness.h"
#include "titan/core/error.h"

namespace titan::data {
namespace {

using nlohmann::json;
using titan::testing::source_path;

const std::string kQwen3Dir = "../shared/assets/qwen3-tokenizer";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::vector<json> read_jsonl(const std::string& relative) {
  std::ifstream in(source_path(relative));
  EXPECT_TRUE(in.good()) << "cannot open " << relative;
  std::vector<json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

const Tokenizer& qwen3() {
  static const Tokenizer tok = Tokenizer::from_file(source_path(kQwen3Dir));
  return tok;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) {
    if (i > 0) s += ',';
    s += std::to_string(ids[i]);
  }
  return s + (ids.size() > 40 ? ",..." : "");
}

// Rust's String::from_utf8_lossy, which HF's decode applies: each maximal prefix of a valid UTF-8
// sequence that is cut short, or a byte that starts none, becomes one U+FFFD.
std::string utf8_lossy(const std::string& bytes) {
  std::string out;
  size_t i = 0;
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  while (i < bytes.size()) {
    const unsigned char c = byte(i);
    const int need = c < 0x80                   ? 0
                     : (c >= 0xC2 && c <= 0xDF) ? 1
                     : (c >= 0xE0 && c <= 0xEF) ? 2
                     : (c >= 0xF0 && c <= 0xF4) ? 3
                                                : -1;
    if (need == 0) {
      out += bytes[i++];
      continue;
    }
    size_t k = i + 1;
    int got = 0;
    if (need > 0) {
      // The second byte's range depends on the lead (no overlongs, surrogates or > U+10FFFF).
      const unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
      const unsigned char hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
      while (got < need && k < bytes.size() && byte(k) >= (got == 0 ? lo : 0x80) && byte(k) <= (got == 0 ? hi : 0xBF)) {
        ++k;
        ++got;
      }
    }
    if (need > 0 && got == need) {
      out.append(bytes, i, k - i);
    } else {
      out += "\xEF\xBF\xBD";
    }
    i = k;
  }
  return out;
}

// Every case: ids identical to HF's, decode equal to HF's decode. Returns the number of cases.
size_t check_cases(const Tokenizer& tok, const std::vector<json>& cases, const std::string& what) {
  size_t failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = cases[i]["text"].get<std::string>();
    const auto want = cases[i]["ids"].get<std::vector<int32_t>>();
    const std::vector<int32_t> got = tok.encode(text);
    if (got != want && ++failures <= 5) {
      ADD_FAILURE() << what << " case " << i << " text " << json(text.substr(0, 200)).dump() << "\n got  " << show(got)
                    << "\n want " << show(want);
    }
    const std::string decoded = utf8_lossy(tok.decode(want));
    if (decoded != cases[i]["decoded"].get<std::string>() && ++failures <= 5) {
      ADD_FAILURE() << what << " case " << i << " decode " << json(decoded.substr(0, 200)).dump();
    }
  }
  EXPECT_EQ(failures, 0u) << what << ": " << failures << " mismatches in " << cases.size() << " cases";
  return cases.size();
}

TEST(Tokenizer, Qwen3MatchesHfTokenizers) {
  const auto cases = read_jsonl("tests/fixtures/tokenizer/qwen3_cases.jsonl");
  ASSERT_GE(cases.size(), 200u);
  check_cases(qwen3(), cases, "qwen3");
}

TEST(Tokenizer, OtherPreTokenizersMatchHfTokenizers) {
  // The same vocabulary under other pre_tokenizer layouts (GPT-2 ByteLevel regex, Digits) and
  // added-token flags; qwen3_variants.json holds the tokenizer.json fields that HF ran with.
  const auto cases = read_jsonl("tests/fixtures/tokenizer/qwen3_variants_cases.jsonl");
  const json patches = json::parse(read_text(source_path("tests/fixtures/tokenizer/qwen3_variants.json")));
  std::map<std::string, std::vector<json>> by_variant;
  for (const json& c : cases) by_variant[c["variant"].get<std::string>()].push_back(c);
  ASSERT_EQ(by_variant.size(), 5u);
  const json qwen3_spec = json::parse(read_text(source_path(kQwen3Dir + "/tokenizer.json")));
  for (const auto& [name, list] : by_variant) {
    json spec = qwen3_spec;
    for (const auto& item : patches.at(name).items()) spec[item.key()] = item.value();
    const Tokenizer tok = Tokenizer::from_json_text(spec.dump(), name);
    check_cases(tok, list, name);
  }
}

TEST(Tokenizer, ConcurrentEncodesMatch) {
  // encode is const and shares the word cache: threads encoding at once get HF's ids.
  const auto cases = read_jsonl("tests/fixtures/tokenizer/qwen3_cases.jsonl");
  const Tokenizer tok = Tokenizer::from_file(source_path(kQwen3Dir));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < cases.size() * 2; i += 3) {
        const json& c = cases[i % cases.size()];
        if (tok.encode(c["text"].get<std::string>()) != c["ids"].get<std::vector<int32_t>>()) ++mismatches[t];
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(Tokenizer, Qwen3Vocabulary) {
  const Tokenizer& tok = qwen3();
  EXPECT_EQ(tok.vocab_size(), 151669);
  EXPECT_EQ(tok.token_id("<|endoftext|>"), 151643);
  EXPECT_EQ(tok.token_id("<|im_end|>"), 151645);
  EXPECT_EQ(tok.token_id("<think>"), 151667);
  EXPECT_EQ(tok.token_id("!"), 0);
  EXPECT_EQ(tok.token_id("not a token"), std::nullopt);
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_EQ(tok.decode(std::vector<int32_t>{}), "");
}

TEST(Tokenizer, RoundTripsBytes) {
  const std::string text("nul\0byte \xC3\xA9\xE2\x80\xA8 <|im_start|>x", 28);
  EXPECT_EQ(qwen3().decode(qwen3().encode(text)), text);
}

// Ids the tokenizer does not know (Qwen3's model vocabulary is padded to 151,936 past the
// tokenizer's 151,669) are skipped and counted: HF tokenizers' decode([1, 151669, 2, 151935]) is '"#',
// the decode of [1, 2].
TEST(Tokenizer, RejectsInvalidUtf8AndSkipsUnknownIds) {
  EXPECT_THROW(qwen3().encode("ab\xC3"), Error);
  EXPECT_THROW(qwen3().encode("\xED\xA0\x80"), Error);  // a surrogate
  const std::vector<int32_t> padded = {1, 151669, 2, 151935, -1};
  int64_t skipped = 0;
  EXPECT_EQ(qwen3().decode(padded, &skipped), "\"#");
  EXPECT_EQ(skipped, 3);
}

// A small tokenizer.json: bytes a, b, c, Ġ and merges a+b, ab+c (ranks from math, not from us).
json tiny() {
  json vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"Ġ", 3}, {"ab", 4}, {"abc", 5}, {"bc", 6}};
  return json{{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", json::array({json{{"id", 7}, {"content", "<x>"}, {"single_word", false},
                                                 {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                                                 {"special", true}}})},
              {"normalizer", {{"type", "NFC"}}},
              {"pre_tokenizer",
               {{"type", "Sequence"},
                {"pretokenizers", json::array({json{{"type", "Split"},
                                                    {"pattern", {{"Regex", "\\s+|[^\\s]+"}}},
                                                    {"behavior", "Isolated"},
                                                    {"invert", false}},
                                               json{{"type", "ByteLevel"},
                                                    {"add_prefix_space", false},
                                                    {"trim_offsets", false},
                                                    {"use_regex", false}}})}}},
              {"post_processor", nullptr},
              {"decoder", {{"type", "ByteLevel"}}},
              {"model",
               {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", nullptr},
                {"vocab", vocab},
                {"merges", json::array({"b c", "a b", "ab c"})}}}};
}

std::string error_of(const std::string& json_text) {
  try {
    Tokenizer::from_json_text(json_text, "tokenizer.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Expected ids follow from the BPE rules (HF tokenizers 0.23.3 gives the same).
TEST(Tokenizer, MergesByRank) {
  const Tokenizer tok = Tokenizer::from_json_text(tiny().dump(), "tiny");
  // "abc": b+c has rank 0, so a|bc, and no a+bc merge exists.
  EXPECT_EQ(tok.encode("abc"), (std::vector<int32_t>{0, 6}));
  EXPECT_EQ(tok.encode("abcabc abc"), (std::vector<int32_t>{0, 6, 0, 6, 3, 0, 6}));
  EXPECT_EQ(tok.encode("ab<x>c a"), (std::vector<int32_t>{4, 7, 2, 3, 0}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{4, 7, 2, 3, 0}), "ab<x>c a");
  // Merges as [a, b] pairs, without b+c: a+b (rank 0), then ab+c (rank 1).
  json spec = tiny();
  spec["model"]["merges"] = json::array({json::array({"a", "b"}), json::array({"ab", "c"})});
  EXPECT_EQ(Tokenizer::from_json_text(spec.dump(), "tiny").encode("abc"), (std::vector<int32_t>{5}));
  // ignore_merges: a piece that is a vocabulary entry is taken whole.
  spec = tiny();
  spec["model"]["ignore_merges"] = true;
  EXPECT_EQ(Tokenizer::from_json_text(spec.dump(), "tiny").encode("abc abcabc"),
            (std::vector<int32_t>{5, 3, 0, 6, 0, 6}));
}

TEST(Tokenizer, ErrorsNameTheJsonPath) {
  EXPECT_NE(error_of("{\"model\": ").find("tokenizer.json: invalid JSON"), std::string::npos);

  json spec = tiny();
  spec["pre_tokenizer"]["pretokenizers"][1] = {{"type", "CharDelimiterSplit"}, {"delimiter", "_"}};
  EXPECT_NE(error_of(spec.dump())
                .find("tokenizer.json: pre_tokenizer.pretokenizers[1].type \"CharDelimiterSplit\" is not supported"),
            std::string::npos)
      << error_of(spec.dump());

  spec = tiny();
  spec["model"]["type"] = "WordPiece";
  EXPECT_NE(error_of(spec.dump()).find("model.type \"WordPiece\" is not supported"), std::string::npos);

  spec = tiny();
  spec["normalizer"] = {{"type", "BertNormalizer"}};
  EXPECT_NE(error_of(spec.dump()).find("normalizer.type \"BertNormalizer\" is not supported"), std::string::npos);

  spec = tiny();
  spec["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(error_of(spec.dump()).find("decoder.type \"WordPiece\" is not supported"), std::string::npos);

  spec = tiny();
  spec["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways";
  EXPECT_NE(error_of(spec.dump()).find("pre_tokenizer.pretokenizers[0].behavior \"Sideways\" is not supported"),
            std::string::npos);

  spec = tiny();
  spec["model"]["merges"][2] = "ab d";
  EXPECT_NE(error_of(spec.dump()).find("model.merges[2] \"d\" is not in model.vocab"), std::string::npos);

  spec = tiny();
  spec["model"]["merges"][1] = json::array({"a", "b"});
  EXPECT_NE(error_of(spec.dump()).find("model.merges[1] mixes"), std::string::npos) << error_of(spec.dump());

  spec = tiny();
  spec["model"]["unk_token"] = "<unk>";
  EXPECT_NE(error_of(spec.dump()).find("model.unk_token \"<unk>\" is not in model.vocab"), std::string::npos);

  // Two tokens on one id: decoding it could give either, so the file is refused naming both.
  spec = tiny();
  spec["model"]["vocab"]["zz"] = 2;
  EXPECT_NE(error_of(spec.dump()).find("tokenizer.json: model.vocab gives id 2 to two tokens, \"c\" and \"zz\""),
            std::string::npos)
      << error_of(spec.dump());

  spec = tiny();
  spec["model"].erase("vocab");
  EXPECT_NE(error_of(spec.dump()).find("model.vocab is missing"), std::string::npos);

  spec = tiny();
  spec["added_tokens"][0]["content"] = 5;
  EXPECT_NE(error_of(spec.dump()).find("added_tokens[0].content must be a string"), std::string::npos);

  spec = tiny();
  spec["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  EXPECT_NE(error_of(spec.dump()).find("cannot compile regex"), std::string::npos);

  spec = tiny();
  spec["extra"] = 1;
  EXPECT_NE(error_of(spec.dump()).find("tokenizer.json: extra is not supported"), std::string::npos);

  EXPECT_NE(error_of("[1, 2]").find("tokenizer.json: (top level) must be an object"), std::string::npos);

  spec = tiny();
  spec["truncation"] = {{"max_length", 8}};
  EXPECT_NE(error_of(spec.dump()).find("truncation must be null"), std::string::npos);
}

TEST(Tokenizer, MissingFileIsAnError) {
  try {
    Tokenizer::from_file("/nonexistent/dir/tokenizer.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read /nonexistent/dir/tokenizer.json"), std::string::npos)
        << e.what();
  }
  // A folder without tokenizer.json names the file it looked for.
  try {
    Tokenizer::from_file(source_path("tests/fixtures"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tests/fixtures/tokenizer.json"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace titan::data

namespace titan::data {
namespace {

// Added tokens whose "id" collides with another token's, names content the vocabulary holds,
// leaves a gap or repeats a content: HF tokenizers ignores those ids when it loads the file and
// assigns its own (tools/make_added_token_fixtures.py); titan gives the same ids, encodes and
// decodes the same.
TEST(TokenizerAddedIds, IdsAreTheOnesHfTokenizersAssigns) {
  const nlohmann::json base =
      nlohmann::json::parse(std::ifstream(titan::testing::source_path("tests/fixtures/tokenizer/trained/tokenizer.json")));
  const nlohmann::json fixture =
      nlohmann::json::parse(std::ifstream(titan::testing::source_path("tests/fixtures/tokenizer/added_ids.json")));
  ASSERT_EQ(fixture["cases"].size(), 6u);
  for (const nlohmann::json& c : fixture["cases"]) {
    const std::string name = c["name"];
    nlohmann::json spec = base;
    spec["added_tokens"] = c["added_tokens"];
    const Tokenizer tok = Tokenizer::from_json_text(spec.dump(), name);
    for (const auto& [content, id] : c["added"].items()) {
      EXPECT_EQ(tok.token_id(content), std::optional<int32_t>(id.get<int32_t>())) << name << " " << content;
    }
    EXPECT_EQ(tok.vocab_size(), c["vocab_size"].get<int64_t>()) << name;
    const std::vector<int32_t> ids = tok.encode(c["text"].get<std::string>());
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << name;
    EXPECT_EQ(tok.decode(ids), c["decoded"].get<std::string>()) << name;
  }
}

}  // namespace
}  // namespace titan::data
