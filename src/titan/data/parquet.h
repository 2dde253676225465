// ParquetReader: reads the rows of one Apache Parquet file as JSON objects, one row group in memory
// at a time (a 10 GB shard is never read whole), only the columns asked for.
//
// Scope: what the Hub and its users' writers produce (pyarrow, polars, duckdb, the Hub's
// parquet-converter): data pages v1 and v2, PLAIN / dictionary (PLAIN_DICTIONARY, RLE_DICTIONARY) /
// RLE (booleans) / DELTA_BINARY_PACKED / DELTA_LENGTH_BYTE_ARRAY / DELTA_BYTE_ARRAY values,
// RLE/bit-packed levels, codecs uncompressed, snappy, gzip, zstd, brotli, lz4 (raw and Hadoop-framed),
// nested columns (structs, lists in the three-level and legacy two-level layouts: the
// `messages: list<struct<role, content>>` of chat data) and nulls. Values become JSON: strings
// (BYTE_ARRAY; bytes that are not UTF-8 are an error, as in JSONL), integers, floats, booleans; a null
// or an absent optional value is JSON null, an empty list []. Maps, INT96 and fixed-length byte
// arrays are refused when selected (columns not selected are never decoded).
//
// Position: the row index within the file (rows already returned); seek() finds the row group from
// the footer's row counts, decodes it and skips to the row, so a reader reopened at a position
// yields exactly what the original would have yielded next.
//
// Damaged input (bad magic, a footer that does not parse or points outside the file, a page that
// decompresses to another size than its header says, levels or values that run out, a selected
// field the schema lacks) is a titan::Error "[data] FILE: row group G, column C: what. HINT: ...".
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace titan::data {

class ParquetReader {
 public:
  // Opens `path` and reads its footer; throws when it is not a Parquet file this reader takes.
  explicit ParquetReader(std::string path);
  // Reads `bytes` (which must outlive the reader), named `name` in messages; one column chunk may
  // decompress to at most `max_chunk_bytes` (the fuzz target's bound).
  ParquetReader(const std::string& name, const std::string& bytes, size_t max_chunk_bytes);
  ~ParquetReader();
  ParquetReader(ParquetReader&&) noexcept;
  ParquetReader& operator=(ParquetReader&&) noexcept;

  // The top-level column (field) names, in schema order.
  std::vector<std::string> fields() const;
  int64_t num_rows() const;
  int num_row_groups() const;

  // Rows from now on hold these top-level fields only (default: none; each must exist: throws naming
  // the file, the field and the fields there are). Resets the position to the start.
  void select(const std::vector<std::string>& fields);

  // The next row as an object {field: value} of the selected fields; false at the end of the file.
  bool next(nlohmann::ordered_json& row);
  void seek(int64_t row);  // throws when row > num_rows()
  int64_t row() const;     // rows returned so far (the position)
  int row_group() const;   // the row group the next row comes from (num_row_groups() at the end)
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The fuzz target's entry: reads every row of every top-level field of `bytes` that can be selected;
// throws titan::Error on bad input, never crashes.
void parquet_read_all(const std::string& bytes);

}  // namespace titan::data
