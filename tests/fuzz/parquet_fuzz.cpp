// libFuzzer target: a Parquet file (a downloaded dataset shard, untrusted) read whole by the reader
// (data/parquet.cpp): footer, schema, every selectable column's pages through their codecs and
// encodings, rows assembled to JSON. titan::Error is the answer to a damaged or hostile file (one
// line naming the file, row group and column); anything else escaping, a crash, a hang, a runaway
// allocation (a column chunk may decompress to at most 64 MiB here) or an ASan/UBSan report is a
// finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "titan/core/error.h"
#include "titan/data/parquet.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    titan::data::parquet_read_all(bytes);
  } catch (const titan::Error&) {
  }
  return 0;
}
