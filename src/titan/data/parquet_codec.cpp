#include "titan/data/parquet_codec.h"

#include <brotli/decode.h>
#include <lz4.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <cstring>

#include "titan/core/error.h"

namespace titan::data::parquet {

namespace {

[[noreturn]] void fail(const std::string& what) { throw ParquetError(what); }

std::string size_mismatch(int codec, size_t got, size_t expected) {
  return str("a ", codec_name(codec), " page decompresses to ", got, " bytes, its header says ", expected);
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// LZ4 as Hadoop frames it (the format's deprecated LZ4 codec): blocks of [u32 BE decompressed size,
// u32 BE compressed size, raw LZ4 block]. False when the bytes are not framed that way (older
// writers used a raw block under the same codec id; the caller then tries that).
bool lz4_hadoop(const uint8_t* src, size_t n, uint8_t* dst, size_t expected) {
  size_t in = 0, out = 0;
  while (in < n) {
    if (n - in < 8) return false;
    const size_t raw = be32(src + in), packed = be32(src + in + 4);
    in += 8;
    if (packed > n - in || raw > expected - out) return false;
    const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(src + in), reinterpret_cast<char*>(dst + out),
                                        static_cast<int>(packed), static_cast<int>(raw));
    if (got < 0 || static_cast<size_t>(got) != raw) return false;
    in += packed;
    out += raw;
  }
  return out == expected;
}

}  // namespace

std::string codec_name(int codec) {
  switch (codec) {
    case kUncompressed: return "UNCOMPRESSED";
    case kSnappy: return "SNAPPY";
    case kGzip: return "GZIP";
    case kLzo: return "LZO";
    case kBrotli: return "BROTLI";
    case kLz4: return "LZ4";
    case kZstd: return "ZSTD";
    case kLz4Raw: return "LZ4_RAW";
    default: return str("codec ", codec);
  }
}

std::vector<uint8_t> decompress(int codec, const uint8_t* src, size_t n, size_t expected) {
  std::vector<uint8_t> out(expected);
  switch (codec) {
    case kUncompressed:
      if (n != expected) fail(str("an uncompressed page holds ", n, " bytes, its header says ", expected));
      if (n) std::memcpy(out.data(), src, n);
      return out;
    case kSnappy: {
      size_t len = 0;
      if (snappy_uncompressed_length(reinterpret_cast<const char*>(src), n, &len) != SNAPPY_OK) {
        fail("a SNAPPY page does not decompress (bad length header)");
      }
      if (len != expected) fail(size_mismatch(codec, len, expected));
      if (snappy_uncompress(reinterpret_cast<const char*>(src), n, reinterpret_cast<char*>(out.data()), &len) !=
          SNAPPY_OK) {
        fail("a SNAPPY page does not decompress (corrupt data)");
      }
      return out;
    }
    case kGzip: {
      z_stream z{};
      if (inflateInit2(&z, 15 + 32) != Z_OK) fail("zlib could not start");  // 15 + 32: gzip or zlib header
      z.next_in = const_cast<Bytef*>(src);
      z.avail_in = static_cast<uInt>(n);
      z.next_out = out.data();
      z.avail_out = static_cast<uInt>(expected);
      const int rc = inflate(&z, Z_FINISH);
      const size_t got = z.total_out;
      inflateEnd(&z);
      if (rc != Z_STREAM_END) {
        fail(rc == Z_BUF_ERROR ? str("a GZIP page decompresses to more than the ", expected, " bytes its header says")
                               : "a GZIP page does not decompress (corrupt data)");
      }
      if (got != expected) fail(size_mismatch(codec, got, expected));
      return out;
    }
    case kZstd: {
      const size_t got = ZSTD_decompress(out.data(), expected, src, n);
      if (ZSTD_isError(got)) fail(str("a ZSTD page does not decompress: ", ZSTD_getErrorName(got)));
      if (got != expected) fail(size_mismatch(codec, got, expected));
      return out;
    }
    case kBrotli: {
      size_t got = expected;
      if (BrotliDecoderDecompress(n, src, &got, out.data()) != BROTLI_DECODER_RESULT_SUCCESS) {
        fail(str("a BROTLI page does not decompress to the ", expected, " bytes its header says"));
      }
      if (got != expected) fail(size_mismatch(codec, got, expected));
      return out;
    }
    case kLz4:
      if (lz4_hadoop(src, n, out.data(), expected)) return out;
      [[fallthrough]];
    case kLz4Raw: {
      if (n > INT32_MAX || expected > INT32_MAX) fail("an LZ4 page is larger than 2 GiB");
      const int got = LZ4_decompress_safe(reinterpret_cast<const char*>(src), reinterpret_cast<char*>(out.data()),
                                          static_cast<int>(n), static_cast<int>(expected));
      if (got < 0) fail(str("a ", codec_name(codec), " page does not decompress (corrupt data)"));
      if (static_cast<size_t>(got) != expected) fail(size_mismatch(codec, static_cast<size_t>(got), expected));
      return out;
    }
    default:
      fail(str("pages are compressed with ", codec_name(codec), ", which titan does not read (it reads UNCOMPRESSED, "
               "SNAPPY, GZIP, ZSTD, BROTLI, LZ4 and LZ4_RAW)"));
  }
}

void Span::need(size_t k, const char* what) const {
  if (k > left()) fail(str(what, " runs past the end of its page"));
}

uint8_t Span::byte(const char* what) {
  need(1, what);
  return p[pos++];
}

uint64_t Span::varint(const char* what) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const uint8_t b = byte(what);
    v |= uint64_t{b & 0x7Fu} << shift;
    if (!(b & 0x80)) return v;
  }
  fail(str(what, ": a varint longer than 10 bytes"));
}

uint32_t Span::u32le(const char* what) {
  need(4, what);
  uint32_t v = 0;
  std::memcpy(&v, p + pos, 4);
  pos += 4;
  return v;
}

int bit_width(uint64_t max_value) {
  int w = 0;
  while (max_value) {
    ++w;
    max_value >>= 1;
  }
  return w;
}

namespace {

// `count` values of `width` bits packed LSB first from p (which holds ceil(count * width / 8) bytes).
template <class T>
void unpack_bits(const uint8_t* p, int width, size_t count, T* out) {
  uint64_t bit = 0;
  for (size_t i = 0; i < count; ++i) {
    uint64_t v = 0;
    for (int b = 0; b < width; ++b, ++bit) v |= uint64_t{(p[bit >> 3] >> (bit & 7)) & 1u} << b;
    out[i] = static_cast<T>(v);
  }
}

}  // namespace

void decode_hybrid(Span& in, int width, size_t count, std::vector<uint32_t>& out) {
  if (width < 0 || width > 32) fail(str("a bit width of ", width, " (at most 32)"));
  const size_t start = out.size();
  out.reserve(start + count);
  while (out.size() - start < count) {
    const uint64_t header = in.varint("RLE/bit-packed data");
    const size_t want = count - (out.size() - start);
    if (header & 1) {  // bit-packed: (header >> 1) groups of 8 values
      const uint64_t groups = header >> 1;
      if (groups == 0 || groups > in.left()) fail("a bit-packed run runs past the end of its page");
      const size_t values = static_cast<size_t>(groups) * 8;
      const size_t take = values < want ? values : want;
      // The values taken must be there; the padding of a page's last run may be cut short.
      in.need((take * static_cast<size_t>(width) + 7) / 8, "a bit-packed run");
      const size_t at = out.size();
      out.resize(at + take);
      unpack_bits(in.p + in.pos, width, take, out.data() + at);
      const size_t bytes = static_cast<size_t>(groups) * static_cast<size_t>(width);
      in.pos += bytes < in.left() ? bytes : in.left();
    } else {  // a run: (header >> 1) copies of one value in ceil(width / 8) bytes
      const uint64_t run = header >> 1;
      if (run == 0) fail("an RLE run of length 0");
      const int bytes = (width + 7) / 8;
      in.need(static_cast<size_t>(bytes), "an RLE run");
      uint32_t v = 0;
      for (int b = 0; b < bytes; ++b) v |= uint32_t{in.p[in.pos + static_cast<size_t>(b)]} << (8 * b);
      in.pos += static_cast<size_t>(bytes);
      if (width < 32 && (v >> width) != 0) fail(str("an RLE value ", v, " wider than ", width, " bits"));
      const size_t take = run < want ? static_cast<size_t>(run) : want;
      out.insert(out.end(), take, v);
    }
  }
}

void decode_delta_binary(Span& in, size_t count, std::vector<int64_t>& out) {
  const uint64_t block = in.varint("DELTA_BINARY_PACKED header");
  const uint64_t minis = in.varint("DELTA_BINARY_PACKED header");
  const uint64_t total = in.varint("DELTA_BINARY_PACKED header");
  const uint64_t first_zz = in.varint("DELTA_BINARY_PACKED header");
  if (block == 0 || block % 128 != 0 || minis == 0 || block % minis != 0 || (block / minis) % 32 != 0 ||
      block > (1u << 20)) {
    fail(str("DELTA_BINARY_PACKED block size ", block, " with ", minis, " miniblocks is not a valid layout"));
  }
  if (total != count) fail(str("DELTA_BINARY_PACKED holds ", total, " values where ", count, " were expected"));
  if (count == 0) return;
  const size_t per_mini = static_cast<size_t>(block / minis);
  uint64_t value = (first_zz >> 1) ^ (~(first_zz & 1) + 1);
  out.push_back(static_cast<int64_t>(value));
  size_t left = count - 1;
  std::vector<uint64_t> deltas(per_mini);
  while (left > 0) {
    const uint64_t min_zz = in.varint("DELTA_BINARY_PACKED block");
    const uint64_t min_delta = (min_zz >> 1) ^ (~(min_zz & 1) + 1);
    in.need(static_cast<size_t>(minis), "DELTA_BINARY_PACKED bit widths");
    const uint8_t* widths = in.p + in.pos;
    in.pos += static_cast<size_t>(minis);
    for (uint64_t m = 0; m < minis && left > 0; ++m) {
      const int w = widths[m];
      if (w > 64) fail(str("DELTA_BINARY_PACKED miniblock bit width ", w, " (at most 64)"));
      const size_t bytes = per_mini * static_cast<size_t>(w) / 8;
      in.need(bytes, "a DELTA_BINARY_PACKED miniblock");
      const size_t take = per_mini < left ? per_mini : left;
      unpack_bits(in.p + in.pos, w, take, deltas.data());
      in.pos += bytes;
      for (size_t i = 0; i < take; ++i) {
        value += min_delta + deltas[i];  // wrapping, as the format defines
        out.push_back(static_cast<int64_t>(value));
      }
      left -= take;
    }
  }
}

}  // namespace titan::data::parquet
