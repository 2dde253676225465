// ParquetReader and Parquet datasets: every fixture file (pyarrow with each codec, page version and
// dictionary setting, pyarrow's delta and byte-stream-split encodings, polars, duckdb;
// tools/make_parquet_fixtures.py) reads back the rows pyarrow reads from it, nested lists of
// structs and nulls included; a folder of shards streams the same documents as the rows' JSONL and
// resumes mid-shard; damaged files are one-line errors naming the file, row group and column.
#include "titan/data/parquet.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "titan/core/error.h"
#include "titan/data/dataset.h"
#include "unit/data/data_test_util.h"

namespace titan::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
using testing::TempDir;
using testing::write_file;

const fs::path kFixtures = fs::path(TITAN_SOURCE_DIR) / "tests/fixtures/parquet";

std::vector<fs::path> fixture_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(kFixtures)) {
    if (e.path().extension() == ".parquet") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<json> read_jsonl(const fs::path& path) {
  std::vector<json> rows;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) rows.push_back(json::parse(line));
  return rows;
}

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Parquet, EveryWriterReadsBackWhatPyarrowReads) {
  const std::vector<fs::path> files = fixture_files();
  ASSERT_GE(files.size(), 29u);
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.filename().string());
    const std::vector<json> want = read_jsonl(kFixtures / "expected" / file.filename().replace_extension(".jsonl"));
    ParquetReader reader(file.string());
    EXPECT_EQ(reader.num_rows(), static_cast<int64_t>(want.size()));
    reader.select(reader.fields());
    ordered_json row;
    size_t n = 0;
    while (reader.next(row)) {
      ASSERT_LT(n, want.size());
      EXPECT_EQ(json::parse(row.dump()), want[n]) << "row " << n;
      ++n;
    }
    EXPECT_EQ(n, want.size());
  }
}

TEST(Parquet, SeekResumesMidRowGroup) {
  ParquetReader reader((kFixtures / "pyarrow_zstd_v2_dict.parquet").string());
  ASSERT_GE(reader.num_row_groups(), 4);
  reader.select({"text", "messages"});
  std::vector<std::string> all;
  ordered_json row;
  while (reader.next(row)) all.push_back(row.dump());
  for (const int64_t at : {int64_t{0}, int64_t{3}, int64_t{8}, int64_t{13}, static_cast<int64_t>(all.size())}) {
    ParquetReader again((kFixtures / "pyarrow_zstd_v2_dict.parquet").string());
    again.select({"text", "messages"});
    again.seek(at);
    std::vector<std::string> rest;
    while (again.next(row)) rest.push_back(row.dump());
    EXPECT_EQ(rest, std::vector<std::string>(all.begin() + at, all.end())) << "from row " << at;
  }
}

TEST(Parquet, ShardFolderStreamsTheJsonlDocumentsAndResumes) {
  TempDir dir;
  fs::create_directories(dir.file("data"));
  // Shards named as the Hub names them; their rows in order are rows.jsonl twice.
  fs::copy_file(kFixtures / "pyarrow_snappy_v1_dict.parquet", dir.file("data/train-00000-of-00002.parquet"));
  fs::copy_file(kFixtures / "polars_zstd.parquet", dir.file("data/train-00001-of-00002.parquet"));
  std::vector<std::string> want;
  for (int k = 0; k < 2; ++k) {
    for (const json& r : read_jsonl(kFixtures / "rows.jsonl")) want.push_back(r["text"].get<std::string>());
  }
  DatasetConfig config{dir.file("data")};
  DocumentSource source(config);
  std::vector<std::string> got;
  std::vector<SourcePosition> positions;
  while (auto d = source.next()) {
    got.push_back(d->text);
    positions.push_back(source.position());
  }
  EXPECT_EQ(got, want);
  for (const size_t k : {size_t{4}, size_t{10}, size_t{36}, size_t{50}}) {
    DocumentSource again(config);
    again.seek(positions[k]);
    std::vector<std::string> rest;
    while (auto d = again.next()) rest.push_back(d->text);
    EXPECT_EQ(rest, std::vector<std::string>(want.begin() + static_cast<std::ptrdiff_t>(k) + 1, want.end())) << k;
  }
}

TEST(Parquet, DamagedFilesAreOneLineErrorsNamingWhere) {
  TempDir dir;
  const std::string good = read_bytes(kFixtures / "pyarrow_snappy_v1_plain.parquet");
  auto check = [&](const std::string& name, const std::string& bytes, const std::vector<std::string>& parts,
                   const std::vector<std::string>& select = {"text"}) {
    write_file(dir.file(name), bytes);
    const std::string e = error_of([&] {
      ParquetReader r(dir.file(name));
      r.select(select);
      ordered_json row;
      while (r.next(row)) {
      }
    });
    EXPECT_NE(e.find(dir.file(name)), std::string::npos) << e;
    for (const std::string& p : parts) EXPECT_NE(e.find(p), std::string::npos) << name << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(e.find("HINT:"), std::string::npos) << e;
  };
  check("magic.parquet", "PAR0" + good.substr(4), {"not a Parquet file"});
  check("truncated.parquet", good.substr(0, good.size() / 2), {"not a Parquet file"});
  std::string footer_len = good;
  footer_len[footer_len.size() - 8] = '\xff';
  footer_len[footer_len.size() - 7] = '\xff';
  check("footer.parquet", footer_len, {"footer length"});
  // The first page (the text column's first data page, at offset 4 without a dictionary) claims
  // one byte more than its snappy data holds: PageHeader = 0x15 type(0x00) 0x15 uncompressed ...
  ASSERT_EQ(good.substr(4, 3), std::string("\x15\x00\x15", 3));
  std::string page = good;
  const auto low = static_cast<unsigned char>(page[7]) & 0x7f;
  page[7] = static_cast<char>(low + 2 < 0x80 ? page[7] + 2 : page[7] - 2);
  check("page.parquet", page, {"row group 0", "column text", "SNAPPY page decompresses to", "its header says"});
  // Text bytes that are not UTF-8 (a literal run of the snappy data overwritten).
  std::string text = good;
  const size_t at = text.find("First Citizen");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 5, std::string(5, '\xfe'));
  check("utf8.parquet", text, {"row group 0", "column text", "not UTF-8"});
  write_file(dir.file("nofield.parquet"), good);
  const std::string e = error_of([&] { ParquetReader(dir.file("nofield.parquet")).select({"content"}); });
  EXPECT_NE(e.find("no column \"content\" (its columns: text, id, score, tags, meta, messages, input_ids)"),
            std::string::npos) << e;
}

TEST(Parquet, FuzzEntryRejectsMutationsWithErrorsOnly) {
  // Every single-byte corruption of a small file either reads or throws titan::Error (the fuzz
  // target's contract, run here over a deterministic sweep).
  const std::string good = read_bytes(kFixtures / "duckdb_zstd.parquet");
  int errors = 0;
  for (size_t i = 0; i < good.size(); i += 7) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    try {
      parquet_read_all(bad);
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace titan::data
