// DocumentSource: formats (JSONL field, text whole-file / blank-line split, zstd, folders), bad input
// as "path:line:" errors or counted skips, and resuming at a saved position.
#include "titan/data/dataset.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include <nlohmann/json.hpp>

#include "titan/core/error.h"
#include "unit/data/data_test_util.h"

namespace titan::data {
namespace {

using nlohmann::json;
using testing::shakespeare;
using testing::TempDir;
using testing::write_file;

std::string jsonl(const std::vector<std::string>& docs, const std::string& field = "text") {
  std::string out;
  for (const auto& d : docs) out += json{{field, d}, {"url", "x"}}.dump() + "\n";
  return out;
}

std::vector<std::string> all_docs(DocumentSource& source) {
  std::vector<std::string> docs;
  while (auto d = source.next()) docs.push_back(d->text);
  return docs;
}

// The error message of reading every document of `config`, or "" when none is thrown.
std::string read_error(const DatasetConfig& config) {
  try {
    DocumentSource source(config);
    all_docs(source);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string zstd_compress(const std::string& bytes) {
  std::string out(ZSTD_compressBound(bytes.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), bytes.data(), bytes.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

TEST(Dataset, JsonlDefaultAndCustomField) {
  TempDir dir;
  const auto docs = shakespeare(5);
  write_file(dir.file("c4.jsonl"), jsonl(docs) + "\n");  // a trailing blank line is not a document
  DocumentSource source(DatasetConfig{dir.file("c4.jsonl")});
  EXPECT_EQ(all_docs(source), docs);

  write_file(dir.file("content.jsonl"), jsonl(docs, "content"));
  DatasetConfig config{dir.file("content.jsonl")};
  config.text_field = "content";
  DocumentSource custom(config);
  EXPECT_EQ(all_docs(custom), docs);
  EXPECT_NE(read_error(DatasetConfig{dir.file("content.jsonl")}).find("content.jsonl:1: no field \"text\""),
            std::string::npos);
}

TEST(Dataset, TextWholeFileAndBlankLineSplit) {
  TempDir dir;
  const std::string text = "a\nb\n\n\n  \nc\n\nd";  // no final newline
  write_file(dir.file("t.txt"), text);
  DocumentSource whole(DatasetConfig{dir.file("t.txt")});
  EXPECT_EQ(all_docs(whole), std::vector<std::string>{text});  // byte for byte

  DatasetConfig split{dir.file("t.txt")};
  split.split_blank_lines = true;
  DocumentSource paragraphs(split);
  EXPECT_EQ(all_docs(paragraphs), (std::vector<std::string>{"a\nb", "c", "d"}));
}

TEST(Dataset, FolderInSortedOrderByExtension) {
  TempDir dir;
  write_file(dir.file("data/b.txt"), "second\n");
  write_file(dir.file("data/a.jsonl"), jsonl({"first"}));
  write_file(dir.file("data/c.json"), jsonl({"third"}));
  write_file(dir.file("data/notes.md"), "not data");
  write_file(dir.file("data/sub/d.txt"), "in a subfolder");
  DocumentSource source(DatasetConfig{dir.file("data")});
  EXPECT_EQ(source.files().size(), 3u);
  EXPECT_EQ(all_docs(source), (std::vector<std::string>{"first", "second\n", "third"}));
}

TEST(Dataset, ZstdStreamsLargeMultiFrameFiles) {
  TempDir dir;
  const auto docs = shakespeare(100000);  // all of it: > 1 MB, many read chunks
  ASSERT_GT(docs.size(), 7000u);
  const std::string text = jsonl(docs);
  const size_t half = text.find('\n', text.size() / 2) + 1;  // two frames, split at a line
  write_file(dir.file("big.jsonl.zst"), zstd_compress(text.substr(0, half)) + zstd_compress(text.substr(half)));
  DocumentSource source(DatasetConfig{dir.file("big.jsonl.zst")});
  EXPECT_EQ(all_docs(source), docs);

  std::string cut = zstd_compress(text);
  cut.resize(cut.size() / 2);
  write_file(dir.file("cut.jsonl.zst"), cut);
  EXPECT_NE(read_error(DatasetConfig{dir.file("cut.jsonl.zst")}).find("truncated"), std::string::npos);
}

TEST(Dataset, SeekResumesExactlyMidFile) {
  TempDir dir;
  const auto docs = shakespeare(3000);
  write_file(dir.file("s.jsonl.zst"), zstd_compress(jsonl(docs)));
  write_file(dir.file("s.txt"), [&] {
    std::string t;
    for (const auto& d : docs) t += d + "\n\n";
    return t;
  }());
  for (const std::string name : {"s.jsonl.zst", "s.txt"}) {
    DatasetConfig config{dir.file(name)};
    config.split_blank_lines = true;
    DocumentSource first(config);
    for (int i = 0; i < 2000; ++i) ASSERT_TRUE(first.next());
    const SourcePosition at = first.position();
    EXPECT_GT(at.byte_offset, 0);
    DocumentSource second(config);
    second.seek(at);
    const auto rest = all_docs(second);
    EXPECT_EQ(rest, std::vector<std::string>(docs.begin() + 2000, docs.end())) << name;
  }
}

TEST(Dataset, BadInputNamesFileAndLine) {
  TempDir dir;
  const std::string good = jsonl({"ok"});
  write_file(dir.file("utf8.jsonl"), good + good + "{\"text\": \"bad \xC3\x28 byte\"}\n");
  write_file(dir.file("syntax.jsonl"), good + "{\"text\": \"unterminated}\n");
  write_file(dir.file("field.jsonl"), good + "{\"body\": \"x\"}\n");
  write_file(dir.file("type.jsonl"), good + good + good + "{\"text\": 7}\n");
  write_file(dir.file("array.jsonl"), "[1, 2]\n");
  write_file(dir.file("empty.jsonl"), "");
  write_file(dir.file("blank.txt"), "\n\n");
  write_file(dir.file("utf8.txt"), "fine\nfine\n\nsurrogate \xED\xA0\x80 here\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"utf8.jsonl", "utf8.jsonl:3: invalid UTF-8"},  {"syntax.jsonl", "syntax.jsonl:2: malformed JSON"},
      {"field.jsonl", "field.jsonl:2: no field"},     {"type.jsonl", "type.jsonl:4: field \"text\" is a number"},
      {"array.jsonl", "array.jsonl:1: malformed"},    {"empty.jsonl", "empty.jsonl:1: empty file"},
      {"blank.txt", "blank.txt:1: empty file"},       {"utf8.txt", "utf8.txt:4: invalid UTF-8"}};
  for (const auto& [name, want] : cases) {
    const std::string got = read_error(DatasetConfig{dir.file(name)});
    EXPECT_NE(got.find(want), std::string::npos) << name << ": got \"" << got << "\"";
    EXPECT_EQ(got.find('\n'), std::string::npos) << "one line: " << got;
  }
}

// A document past kMaxDocumentBytes is refused, naming the file and line, before more than the
// limit is buffered: one long JSONL line (the second), and a .txt file (one document) of many lines.
TEST(Dataset, DocumentsPastTheLimitAreRefused) {
  TempDir dir;
  const std::string big(kMaxDocumentBytes, 'a');
  write_file(dir.file("long.jsonl"), jsonl({"ok"}) + "{\"text\": \"" + big + "\"}\n");
  write_file(dir.file("long.txt"), "first line\n" + big + "a\n");
  std::string lines;
  for (size_t i = 0; lines.size() <= kMaxDocumentBytes; ++i) lines += "line of a big text file\n";
  write_file(dir.file("many.txt"), lines);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"long.jsonl", "long.jsonl:2: a line longer than 64 MiB, the most one document may hold"},
      {"long.txt", "long.txt:2: a line longer than 64 MiB"},
      {"many.txt", "many.txt: a .txt file is one document, and this one is longer than 64 MiB (line 2796203)"}};
  for (const auto& [name, want] : cases) {
    const std::string got = read_error(DatasetConfig{dir.file(name)});
    EXPECT_NE(got.find(want), std::string::npos) << name << ": got \"" << got << "\"";
    EXPECT_EQ(got.find('\n'), std::string::npos) << "one line: " << got;
  }
  // At the limit, a document is read whole.
  write_file(dir.file("edge.txt"), std::string(kMaxDocumentBytes - 1, 'b') + "\n");
  DocumentSource edge(DatasetConfig{dir.file("edge.txt")});
  const std::optional<Document> doc = edge.next();
  ASSERT_TRUE(doc.has_value());
  EXPECT_EQ(doc->text.size(), kMaxDocumentBytes);
}

TEST(Dataset, MissingPathAndEmptyFolder) {
  TempDir dir;
  EXPECT_NE(read_error(DatasetConfig{dir.file("nope.jsonl")}).find("nope.jsonl' does not exist"),
            std::string::npos);
  // A symbolic link loop and a dangling link say so (not "does not exist").
  std::filesystem::create_symlink("loop_b.jsonl", dir.file("loop_a.jsonl"));
  std::filesystem::create_symlink("loop_a.jsonl", dir.file("loop_b.jsonl"));
  std::filesystem::create_symlink("gone.jsonl", dir.file("dangling.jsonl"));
  EXPECT_NE(read_error(DatasetConfig{dir.file("loop_a.jsonl")}).find("loop_a.jsonl' is a symbolic link loop"),
            std::string::npos);
  EXPECT_NE(read_error(DatasetConfig{dir.file("dangling.jsonl")}).find("is a symbolic link to a missing target"),
            std::string::npos);
  std::filesystem::create_directories(dir.file("empty"));
  write_file(dir.file("empty/readme.md"), "x");
  EXPECT_NE(read_error(DatasetConfig{dir.file("empty")}).find("folder holds no dataset files"),
            std::string::npos);
  write_file(dir.file("data.csv"), "a,b\n");
  EXPECT_NE(read_error(DatasetConfig{dir.file("data.csv")}).find("unknown file type"), std::string::npos);
}

TEST(Dataset, SkipBadLinesCountsThem) {
  TempDir dir;
  write_file(dir.file("d/a.jsonl"), jsonl({"one"}) + "{broken\n" + jsonl({"two"}) + "{\"x\": 1}\n" +
                                        "{\"text\": \"\xFF\"}\n" + jsonl({"three"}));
  write_file(dir.file("d/b.jsonl"), "");
  DatasetConfig config{dir.file("d")};
  config.skip_bad_lines = true;
  DocumentSource source(config);
  EXPECT_EQ(all_docs(source), (std::vector<std::string>{"one", "two", "three"}));
  EXPECT_EQ(source.num_bad_lines(), 4);  // three bad lines + one empty file
  source.rewind();
  EXPECT_EQ(all_docs(source).size(), 3u);
  EXPECT_EQ(source.num_bad_lines(), 8);
}

TEST(Dataset, ValidUtf8) {
  EXPECT_TRUE(valid_utf8("plain \xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80"));
  size_t at = 0;
  for (const std::string bad : {"\x80", "\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xE4\xB8"}) {
    EXPECT_FALSE(valid_utf8("ab" + bad, &at));
    EXPECT_EQ(at, 2u);
  }
}

}  // namespace
}  // namespace titan::data
