// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord framing needs it. A plain
// table-driven software version: event files are a few bytes per log step, so speed is moot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace titan {

// crc32c of `size` bytes; `crc` continues a previous result (0 to start).
uint32_t crc32c(const void* data, size_t size, uint32_t crc = 0);
inline uint32_t crc32c(std::string_view bytes) { return crc32c(bytes.data(), bytes.size()); }

// TFRecord's masked CRC: rotate right by 15, add a constant. The mask keeps a CRC of data that
// itself holds CRCs from being degenerate.
inline uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace titan
