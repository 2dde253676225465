// libFuzzer target: the safetensors header parser (SafetensorsFile::parse_header, the code open()
// runs on the mapped file). The input is a whole file. titan::Error is the parser's answer to bad
// input; anything else escaping, a crash or ASan/UBSan report is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "titan/checkpoint/safetensors.h"
#include "titan/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view file(reinterpret_cast<const char*>(data), size);
  try {
    const titan::ckpt::SafetensorsHeader h = titan::ckpt::SafetensorsFile::parse_header(file, "fuzz.safetensors");
    // What a successful parse promises: every tensor lies inside the data section.
    const uint64_t data_size = size - h.data_offset;
    for (const auto& t : h.tensors) {
      if (h.data_offset > size || t.begin > t.end || t.end > data_size) __builtin_trap();
    }
  } catch (const titan::Error&) {
  }
  return 0;
}
