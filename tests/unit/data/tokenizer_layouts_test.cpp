// Tokenizer layouts that published decoder LMs ship, against HF tokenizers (fixtures from
// tools/make_tokenizer_layout_fixtures.py): Llama 3 (ByteLevel, ignore_merges, TemplateProcessing),
// Llama 2 / Mistral (Prepend + Replace normalizer or Metaspace, byte_fallback, fuse_unk, the
// Replace/ByteFallback/Fuse/Strip decoder) and other normalizers, pre-tokenizers and decoders;
// then one refusal per unsupported component kind.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ops/op_harness.h"
#include "titan/core/error.h"
#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {
namespace {

using nlohmann::json;
using titan::testing::source_path;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

json layout_spec(const std::string& layout) {
  return json::parse(read_text(source_path("tests/fixtures/tokenizer/" + layout + "/tokenizer.json")));
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size() && i < 40; ++i) s += (i > 0 ? "," : "") + std::to_string(ids[i]);
  return s + (ids.size() > 40 ? ",..." : "");
}

// Every case of every variant of `layout`: ids with and without special tokens equal HF's, and
// both decodes equal HF's. Returns the number of cases checked.
size_t check_layout(const std::string& layout) {
  const std::string dir = "tests/fixtures/tokenizer/" + layout;
  const json base = layout_spec(layout);
  const json variants = json::parse(read_text(source_path(dir + "/variants.json")));
  std::ifstream in(source_path(dir + "/cases.jsonl"));
  EXPECT_TRUE(in.good()) << "cannot open " << dir << "/cases.jsonl";
  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  size_t cases = 0, failures = 0;
  std::string line;
  while (std::getline(in, line)) {
    const json c = json::parse(line);
    const std::string variant = c["variant"].get<std::string>();
    auto& tok = tokenizers[variant];
    if (!tok) {
      json spec = base;
      if (variant != "base") spec.update(variants.at(variant));
      tok = std::make_unique<Tokenizer>(Tokenizer::from_json_text(spec.dump(), layout + "/" + variant));
    }
    ++cases;
    const std::string text = c["text"].get<std::string>();
    const std::string what = layout + "/" + variant + " " + json(text.substr(0, 80)).dump();
    for (const bool special : {false, true}) {
      const auto want = c[special ? "ids_special" : "ids"].get<std::vector<int32_t>>();
      const std::vector<int32_t> got = tok->encode(text, special);
      if (got != want && ++failures <= 8) {
        ADD_FAILURE() << what << (special ? " (special)" : "") << "\n got  " << show(got) << "\n want " << show(want);
      }
      const std::string decoded = tok->decode(want);
      const std::string want_text = c[special ? "decoded_special" : "decoded"].get<std::string>();
      if (decoded != want_text && ++failures <= 8) {
        ADD_FAILURE() << what << (special ? " (special)" : "") << " decode " << json(decoded).dump() << " want "
                      << json(want_text).dump();
      }
    }
  }
  EXPECT_EQ(failures, 0u) << layout << ": " << failures << " mismatches in " << cases << " cases";
  return cases;
}

TEST(TokenizerLayouts, Llama3MatchesHfTokenizers) {
  EXPECT_GT(check_layout("llama3"), 50u);
  const Tokenizer tok = Tokenizer::from_file(source_path("tests/fixtures/tokenizer/llama3"));
  EXPECT_EQ(tok.special_prefix(), std::vector<int32_t>{tok.token_id("<|begin_of_text|>").value()});
  EXPECT_TRUE(tok.special_suffix().empty());
}

TEST(TokenizerLayouts, Llama2MatchesHfTokenizers) { EXPECT_GT(check_layout("llama2"), 100u); }

TEST(TokenizerLayouts, OtherNormalizersPreTokenizersDecodersMatchHfTokenizers) {
  EXPECT_GT(check_layout("other"), 500u);
  EXPECT_GT(check_layout("other_suffix"), 50u);
}

std::string error_of(const json& spec) {
  try {
    Tokenizer::from_json_text(spec.dump(), "tokenizer.json");
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
    return msg;
  }
  return "(no error)";
}

void expect_refused(const json& spec, const std::string& want) {
  const std::string got = error_of(spec);
  EXPECT_NE(got.find("[tokenizer] tokenizer.json: " + want), std::string::npos) << got;
}

// Older Metaspace fields, read as HF reads them (checked with tokenizers 0.23.3: the same ids as
// the variant they rewrite): add_prefix_space true is ignored, false needs "never"; str_rep is
// ignored; prepend_scheme defaults to "always" and split to true.
TEST(TokenizerLayouts, OlderMetaspaceFields) {
  const json base = layout_spec("other");
  const json variants = json::parse(read_text(source_path("tests/fixtures/tokenizer/other/variants.json")));
  const auto with = [&](const std::string& variant, const json& pre) {
    json spec = base;
    spec.update(variants.at(variant));
    spec["pre_tokenizer"] = pre;
    return spec;
  };
  const std::string rep = "\xE2\x96\x81";
  for (const auto& [variant, pre] : std::vector<std::pair<std::string, json>>{
           {"metaspace_never", {{"type", "Metaspace"}, {"replacement", rep}, {"add_prefix_space", false},
                                {"prepend_scheme", "never"}}},
           {"metaspace_first_nosplit", {{"type", "Metaspace"}, {"replacement", rep}, {"add_prefix_space", true},
                                        {"prepend_scheme", "first"}, {"split", false}}},
           {"metaspace_always_split", {{"type", "Metaspace"}, {"replacement", rep}, {"add_prefix_space", true},
                                       {"str_rep", rep}}}}) {
    json current = base;
    current.update(variants.at(variant));
    const Tokenizer want = Tokenizer::from_json_text(current.dump(), variant);
    const Tokenizer got = Tokenizer::from_json_text(with(variant, pre).dump(), variant + " (older fields)");
    for (const std::string text : {"Hello world", " two  spaces ", "", "a\tb\nc", "x \xE2\x96\x81 y"}) {
      EXPECT_EQ(got.encode(text), want.encode(text)) << variant << " " << json(text).dump();
    }
  }
  expect_refused(with("metaspace_never", {{"type", "Metaspace"}, {"replacement", rep}, {"add_prefix_space", false}}),
                 "pre_tokenizer.add_prefix_space false does not match prepend_scheme \"always\"");
}

// One refusal per kind of component titan does not implement (HF would tokenize differently).
TEST(TokenizerLayouts, UnsupportedComponentsAreOneLineErrors) {
  const json llama2 = layout_spec("llama2");
  const json llama3 = layout_spec("llama3");
  json spec = llama2;
  spec["model"]["type"] = "Unigram";
  expect_refused(spec, "model.type \"Unigram\" is not supported. HINT:");
  spec["model"]["type"] = "WordPiece";
  expect_refused(spec, "model.type \"WordPiece\" is not supported. HINT:");
  spec = llama2;
  spec["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  expect_refused(spec, "normalizer.type \"Precompiled\" is not supported. HINT:");
  spec["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "StripAccents"}}}}};
  expect_refused(spec, "normalizer.normalizers[0].type \"StripAccents\" is not supported");
  spec = llama2;
  spec["pre_tokenizer"] = {{"type", "UnicodeScripts"}};
  expect_refused(spec, "pre_tokenizer.type \"UnicodeScripts\" is not supported. HINT:");
  spec = llama3;
  spec["post_processor"] = {{"type", "RobertaProcessing"}};
  expect_refused(spec, "post_processor.type \"RobertaProcessing\" is not supported. HINT:");
  spec = llama2;
  spec["decoder"] = {{"type", "CTC"}};
  expect_refused(spec, "decoder.type \"CTC\" is not supported. HINT:");
  spec["decoder"] = {{"type", "Replace"}, {"pattern", {{"Regex", "_+"}}}, {"content", " "}};
  expect_refused(spec, "decoder.pattern {\"Regex\": ...} is not supported in a decoder");

  // Unknown fields inside known components, and template mistakes.
  spec = llama2;
  spec["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "first"}, {"legacy", true}};
  expect_refused(spec, "pre_tokenizer.legacy is not supported");
  spec["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "_"}, {"prepend_scheme", "sometimes"}};
  expect_refused(spec, "pre_tokenizer.prepend_scheme \"sometimes\" is not supported");
  spec = llama2;
  spec["normalizer"]["normalizers"][0]["where"] = "end";
  expect_refused(spec, "normalizer.normalizers[0].where is not supported");
  spec = llama2;
  spec["post_processor"]["single"][0]["SpecialToken"]["id"] = "<bos>";
  expect_refused(spec, "post_processor.single[0].SpecialToken.id \"<bos>\" is not in post_processor.special_tokens");
  spec = llama2;
  spec["post_processor"]["single"][1]["Sequence"]["id"] = "B";
  expect_refused(spec, "post_processor.single[1].Sequence.id \"B\" must be \"A\"");
  spec = llama2;
  spec["post_processor"]["pair"].erase(3);
  expect_refused(spec, "post_processor.pair must name sequence A once and sequence B once");
  spec = llama3;
  spec["post_processor"]["processors"][0] = spec["post_processor"]["processors"][1];
  expect_refused(spec, "post_processor.processors[1] is a second TemplateProcessing");
  spec = llama2;
  spec["model"]["dropout"] = 0.1;
  expect_refused(spec, "model.dropout must be null or 0");
  spec = llama2;
  spec["model"]["unk_token"] = "<nope>";
  expect_refused(spec, "model.unk_token \"<nope>\" is not in model.vocab");
}

// Checks by hand on the Llama 2 layout, with expected ids from the rules, not from titan.
TEST(TokenizerLayouts, ByteFallbackAndUnknowns) {
  json spec = layout_spec("llama2");
  const auto& vocab = spec["model"]["vocab"];
  const auto id = [&](const std::string& t) { return vocab.at(t).get<int32_t>(); };
  // U+4E2D is not in the vocabulary: its three UTF-8 bytes become <0xE4><0xB8><0xAD>.
  const Tokenizer tok = Tokenizer::from_json_text(spec.dump(), "llama2");
  EXPECT_EQ(tok.encode("\xE4\xB8\xAD"), (std::vector<int32_t>{id("\xE2\x96\x81"), id("<0xE4>"), id("<0xB8>"), id("<0xAD>")}));
  EXPECT_EQ(tok.decode(std::vector<int32_t>{id("<0xE4>"), id("<0xB8>"), id("<0xAD>")}), "\xE4\xB8\xAD");
  // Without byte fallback the character is unknown: one <unk> for a run (fuse_unk), else one each.
  spec["model"]["byte_fallback"] = false;
  EXPECT_EQ(Tokenizer::from_json_text(spec.dump(), "x").encode("\xE4\xB8\xAD\xE4\xB8\xAD"),
            (std::vector<int32_t>{id("\xE2\x96\x81"), id("<unk>")}));
  spec["model"]["fuse_unk"] = false;
  EXPECT_EQ(Tokenizer::from_json_text(spec.dump(), "x").encode("\xE4\xB8\xAD\xE4\xB8\xAD"),
            (std::vector<int32_t>{id("\xE2\x96\x81"), id("<unk>"), id("<unk>")}));
}

}  // namespace
}  // namespace titan::data
