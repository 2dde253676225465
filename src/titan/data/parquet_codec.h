// Parquet's page codecs and level/value encodings, as the format specification defines them
// (github.com/apache/parquet-format: Encodings.md, Compression.md). Every function reads from a
// bounded span and throws ParquetError (a message, no location) when the input runs out or
// disagrees with itself; the reader (parquet.cpp) adds the file, row group and column.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace titan::data::parquet {

struct ParquetError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// CompressionCodec values of the format.
enum Codec : int { kUncompressed = 0, kSnappy = 1, kGzip = 2, kLzo = 3, kBrotli = 4, kLz4 = 5, kZstd = 6, kLz4Raw = 7 };
std::string codec_name(int codec);

// Decompresses `n` bytes at `src` that must expand to exactly `expected` bytes.
std::vector<uint8_t> decompress(int codec, const uint8_t* src, size_t n, size_t expected);

// A bounded reader over bytes.
struct Span {
  const uint8_t* p = nullptr;
  size_t n = 0;
  size_t pos = 0;

  size_t left() const { return n - pos; }
  void need(size_t k, const char* what) const;  // throws "<what> runs past the end of its page"
  uint8_t byte(const char* what);
  uint64_t varint(const char* what);
  uint32_t u32le(const char* what);
};

// RLE / bit-packed hybrid (Encodings.md "RLE"): `count` values of `bit_width` bits, appended to out.
void decode_hybrid(Span& in, int bit_width, size_t count, std::vector<uint32_t>& out);

// DELTA_BINARY_PACKED: `count` integers appended to out (wrapping arithmetic, as the format says);
// `in` is left after the last miniblock that held values.
void decode_delta_binary(Span& in, size_t count, std::vector<int64_t>& out);

int bit_width(uint64_t max_value);  // bits needed for values 0..max_value

}  // namespace titan::data::parquet
