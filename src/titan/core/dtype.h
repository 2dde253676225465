// Element types and bf16/f16 <-> f32 conversion.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace titan {

// f64 is for host-side reductions (losses, norms, counters through Comm::all_reduce_sum); it is
// not a parameter, activation or checkpoint dtype, and convert() does not take it.
// u8 / i8: a quantized weight's codes (ops/quantize: NF4 packed two per byte, int8).
enum class DType : uint8_t { f32, bf16, f16, i32, i64, f64, u8, i8 };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // "f32", "bf16", ...

// bf16 is the top half of an f32; rounding to nearest even, NaN kept quiet.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// Converts n elements between float dtypes (f32, bf16, f16), any direction.
void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n);

}  // namespace titan
