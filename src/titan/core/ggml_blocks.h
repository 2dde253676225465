// ggml's tensor element types (the `type` of a GGUF tensor, ggml/include/ggml.h) and the block
// codecs titan reads and writes. A quantized type stores a row of n elements as n / block blocks
// of `bytes` bytes each; rows are independent (a row's length must be a multiple of its block).
// The decoders follow ggml's reference dequantize_row_* (ggml/src/ggml-quants.c) operation by
// operation in f32, so a value decodes to the same float there, in the gguf Python package and
// here (tests/unit/core/ggml_blocks_test.cpp compares with the package bit for bit):
//   q8_0  32 elements: f16 d, i8 q[32]              x = q * d
//   q4_0  32 elements: f16 d, u8 q[16]              x_j = ((q_j & 15) - 8) * d, x_{j+16} = ((q_j >> 4) - 8) * d
//   q4_1  32 elements: f16 d, f16 m, u8 q[16]       x = q4 * d + m
//   q5_0  32 elements: f16 d, u32 qh, u8 q[16]      x = (q5 - 16) * d, q5's fifth bit from qh
//   q5_1  32 elements: f16 d, f16 m, u32 qh, u8 q[16]  x = q5 * d + m
//   q4_k  256 elements: f16 d, f16 dmin, u8 scales[12], u8 q[128]; 8 sub-blocks of 32 with 6-bit
//         scale and min: x = (d * sc) * q4 - (dmin * m)
//   q5_k  256 elements: as q4_k plus u8 qh[32] holding each value's fifth bit
//   q6_k  256 elements: u8 ql[128], u8 qh[64], i8 scales[16], f16 d: x = (d * sc) * (q6 - 32)
// q8_0 is also written (quantize_q8_0, ggml's quantize_row_q8_0_ref: d = amax / 127, q =
// round-half-away(x * (1 / d)), as llama.cpp's converter writes it with numpy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace titan {

enum class GgmlType : uint32_t {
  f32 = 0, f16 = 1, q4_0 = 2, q4_1 = 3, q5_0 = 6, q5_1 = 7, q8_0 = 8, q8_1 = 9,
  q2_k = 10, q3_k = 11, q4_k = 12, q5_k = 13, q6_k = 14, q8_k = 15, bf16 = 30,
};

struct GgmlTypeInfo {
  GgmlType type;
  const char* name;   // ggml's name: "f32", "q4_K", ...
  int64_t block = 1;  // elements per block
  int64_t bytes = 4;  // bytes per block
  bool decodable = false;  // titan decodes it (dequantize_row)
};

// The ggml type numbered `id`, or nullptr when titan does not know the number at all.
const GgmlTypeInfo* ggml_type_info(uint32_t id);
const GgmlTypeInfo& ggml_type_info(GgmlType type);
// "f32" | "f16" | "bf16" | "q8_0" | "q4_0" | "q4_1" | "q5_0" | "q5_1" | "q4_k" | "q5_k" | "q6_k"
// (case-insensitive);
// false for another name.
bool parse_ggml_type(const std::string& name, GgmlType* out);

// Bytes of a row of n elements of `info` (n a multiple of its block).
inline uint64_t ggml_row_bytes(const GgmlTypeInfo& info, int64_t n) {
  return static_cast<uint64_t>(n / info.block) * static_cast<uint64_t>(info.bytes);
}

// Decodes n elements (a multiple of the block) of a decodable type into f32.
void ggml_dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);
// Encodes n elements (a multiple of 32) as q8_0 blocks into dst (n / 32 * 34 bytes).
void ggml_quantize_q8_0(const float* src, void* dst, int64_t n);

}  // namespace titan
