// Weight quantization of a frozen LoRA base (QLoRA, Dettmers et al. 2023) in bitsandbytes'
// formats, so that a quantized base holds what it holds there (tests/ops/quant_test.cpp compares
// both with bitsandbytes bit for bit):
//   nf4   blocks of kNf4Block = 64 consecutive elements of the flattened weight (the last may be
//         shorter), each with its absmax a = max |w| (f32). With s = clamp(w * (1 / max(a, 1e-38)),
//         -1, 1) in f32, an element's code is the number of midpoints m_j = (v_j + v_{j+1}) / 2
//         (f32) below s (bitsandbytes' bucketize: a value on a midpoint takes the lower code). Two
//         codes per byte, element 2i in the high nibble; an odd count pads code 7 (the value 0).
//         Dequantized: v_code * a, in f32.
//   int8  per output row o (dim 0) its absmax s_o; q = round_half_even(w * ((1 / s_o) * 127)),
//         each product rounded to f32 as bitsandbytes' torch expressions round it; a row of zeros
//         gets q = 0. Dequantized: (q * s_o) * (1/127 as f32).
//   gguf  a GGUF file's own blocks, kept as llama.cpp stores them (lora.base_quantization=gguf over
//         a GGUF base): codes u8 [O * row bytes], row o's blocks; scales f32 [1], the ggml type's
//         number (core/ggml_blocks.h: q8_0, q4_0, q4_1, q5_0, q5_1, q4_K, q5_K, q6_K). Loading copies the
//         file's blocks in (models/decoder/weights.cpp); quantize encodes q8_0 only. Dequantized:
//         ggml's decoder, in f32.
// v_0..v_15 are the NF4 code book (kNf4: the quantiles of N(0, 1) scaled to [-1, 1], QLoRA's
// table as bitsandbytes stores it in f32).
// Shapes: w_OI f32 or bf16 (read as f32), contiguous; nf4: codes u8 [ceil(O I / 2)], absmax f32
// [ceil(O I / 64)]; int8: codes i8 [O, I], scale f32 [O]. dequantize writes out_OI, f32 or bf16
// (bf16: the f32 value rounded to nearest even). Nothing here is differentiated (a frozen base has
// no gradient): forward only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "titan/core/ggml_blocks.h"
#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

enum class QuantKind { nf4, int8, gguf };
const char* quant_kind_name(QuantKind kind);  // "nf4" | "int8" | "gguf"
// A base quantization's name as configs and flags spell it: "none" (kind left empty), "nf4",
// "int8" or "gguf". False for any other name; the caller reports it.
bool parse_base_quantization(const std::string& name, std::optional<QuantKind>& kind);

constexpr int64_t kNf4Block = 64;
extern const std::array<float, 16> kNf4;

// The codes and scales tensors of a weight of `shape` (2-D) in `kind`, zero-filled (gguf: of q8_0
// blocks, which loading replaces with the file's).
Tensor quant_codes(QuantKind kind, const Shape& shape, Device device);
Tensor quant_scales(QuantKind kind, const Shape& shape, Device device);

// Throw naming the tensor, what was found and what was expected.
void check_quantize(QuantKind kind, const Tensor& w, const Tensor& codes, const Tensor& scales);
void check_dequantize(QuantKind kind, const Tensor& codes, const Tensor& scales, const Tensor& out);

void quantize(QuantKind kind, const Tensor& w_OI, Tensor& codes, Tensor& scales);
void dequantize(QuantKind kind, const Tensor& codes, const Tensor& scales, Tensor& out_OI);

using QuantizeImpl = OpImpl<bool (*)(const Tensor& w),
                            void (*)(QuantKind kind, const Tensor& w, Tensor& codes, Tensor& scales),
                            std::nullptr_t>;
using DequantizeImpl = OpImpl<bool (*)(const Tensor& codes),
                              void (*)(QuantKind kind, const Tensor& codes, const Tensor& scales, Tensor& out),
                              std::nullptr_t>;
OpTable<QuantizeImpl>& quantize_table();
OpTable<DequantizeImpl>& dequantize_table();
QuantizeImpl quantize_impl_ref();
QuantizeImpl quantize_impl_cpu();
DequantizeImpl dequantize_impl_ref();
DequantizeImpl dequantize_impl_cpu();

// The per-element math both kernels share (the contract's f32 roundings).
namespace quant {
uint8_t nf4_code(float w, float inverse_absmax);  // inverse_absmax = 1 / max(a, 1e-38)
float nf4_inverse(float absmax);
int8_t int8_code(float w, float factor);          // factor = int8_factor(s_o)
float int8_factor(float row_absmax);
float int8_value(int8_t q, float row_absmax);
GgmlType gguf_type(const Tensor& scales);  // a gguf weight's block type, from its scales
// gguf weights, both kernels: q8_0 encoding of w (f32 or bf16), and rows [ob, oe) decoded.
void quantize_gguf(const Tensor& w, Tensor& codes, const Tensor& scales);
void dequantize_gguf_rows(const Tensor& codes, const Tensor& scales, Tensor& out, int64_t ob, int64_t oe);
}  // namespace quant

}  // namespace titan::ops
