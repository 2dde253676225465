#include "titan/core/crc32c.h"

#include <nmmintrin.h>

#include <cstring>

namespace titan {

// SSE4.2's crc32 instruction computes exactly CRC32C (Castagnoli, reflected 0x82F63B78); every
// machine titan runs on has it (the AVX2 baseline implies SSE4.2). 8 bytes per instruction: about
// 8 GB/s on one core, where a byte-table loop managed ~0.5 and took a quarter of a checkpoint save.
uint32_t crc32c(const void* data, size_t size, uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t c = ~crc;
  for (; size >= 8; size -= 8, p += 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; size > 0; --size, ++p) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

}  // namespace titan
