// libFuzzer target: the GGUF reader (GgufFile::parse, the code open() runs on the mapped file) and
// ggml's block decoders on what it accepts. The input is a whole file. titan::Error is the
// reader's answer to bad input; anything else escaping, a crash or an ASan/UBSan report is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "titan/checkpoint/gguf.h"
#include "titan/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  try {
    const titan::ckpt::GgufFile f = titan::ckpt::GgufFile::parse(file, "fuzz.gguf");
    // What a successful parse promises: every tensor's bytes lie inside the file, and a decodable
    // tensor's rows decode (the first few, to keep runs fast).
    for (const titan::ckpt::GgufTensorInfo& t : f.tensors()) {
      const uint8_t* begin = f.data(t);
      if (begin < data || begin + t.bytes > data + size) __builtin_trap();
      const titan::GgmlTypeInfo& info = titan::ggml_type_info(t.type);
      if (!info.decodable || t.ne[0] > 4096) continue;
      std::vector<float> row(static_cast<size_t>(t.ne[0]));
      const uint64_t row_bytes = titan::ggml_row_bytes(info, t.ne[0]);
      for (int64_t r = 0; r < t.rows() && r < 4; ++r) {
        titan::ggml_dequantize_row(t.type, begin + static_cast<uint64_t>(r) * row_bytes, row.data(), t.ne[0]);
      }
    }
  } catch (const titan::Error&) {
  }
  return 0;
}
