// The code book, the shared per-element math, contract checks and dispatch.
#include "titan/ops/quantize/quantize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "titan/ops/builtin.h"

namespace titan::ops {

// QLoRA's NF4 values as bitsandbytes stores them (f32).
const std::array<float, 16> kNf4 = {-1.0f,
                                    -0.6961928009986877f,
                                    -0.5250730514526367f,
                                    -0.39491748809814453f,
                                    -0.28444138169288635f,
                                    -0.18477343022823334f,
                                    -0.09105003625154495f,
                                    0.0f,
                                    0.07958029955625534f,
                                    0.16093020141124725f,
                                    0.24611230194568634f,
                                    0.33791524171829224f,
                                    0.44070982933044434f,
                                    0.5626170039176941f,
                                    0.7229568362236023f,
                                    1.0f};

const char* quant_kind_name(QuantKind kind) {
  return kind == QuantKind::nf4 ? "nf4" : kind == QuantKind::int8 ? "int8" : "gguf";
}

bool parse_base_quantization(const std::string& name, std::optional<QuantKind>& kind) {
  kind.reset();
  if (name == "nf4") kind = QuantKind::nf4;
  if (name == "int8") kind = QuantKind::int8;
  if (name == "gguf") kind = QuantKind::gguf;
  return kind.has_value() || name == "none";
}

static DType codes_dtype(QuantKind kind) { return kind == QuantKind::int8 ? DType::i8 : DType::u8; }

namespace quant {
namespace {
struct Midpoints {
  std::array<float, 15> m;
  Midpoints() {
    for (size_t j = 0; j < 15; ++j) m[j] = (kNf4[j] + kNf4[j + 1]) / 2.0f;
  }
};
const Midpoints kMid;
}  // namespace

float nf4_inverse(float absmax) { return 1.0f / std::max(absmax, 1e-38f); }

uint8_t nf4_code(float w, float inverse_absmax) {
  const float s = std::clamp(w * inverse_absmax, -1.0f, 1.0f);
  uint8_t code = 0;
  for (float m : kMid.m) code += m < s ? 1 : 0;
  return code;
}

float int8_factor(float row_absmax) { return (1.0f / row_absmax) * 127.0f; }

int8_t int8_code(float w, float factor) {
  const float q = std::nearbyint(w * factor);  // the default rounding mode: half to even
  return std::isfinite(q) ? static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f)) : int8_t{0};
}

float int8_value(int8_t q, float row_absmax) { return (static_cast<float>(q) * row_absmax) * (1.0f / 127.0f); }

GgmlType gguf_type(const Tensor& scales) {
  if (scales.device() == Device::meta) return GgmlType::q8_0;  // a plan's shapes: what init allocates
  const float id = scales.data<float>()[0];
  const GgmlTypeInfo* info = id >= 0.0f && id < 64.0f ? ggml_type_info(static_cast<uint32_t>(id)) : nullptr;
  TITAN_CHECK(info != nullptr && info->decodable && info->block > 1, "[dequantize] gguf scales name ggml type ", id,
              ", not a block type titan decodes");
  return info->type;
}
void quantize_gguf(const Tensor& w, Tensor& codes, const Tensor& scales) {
  TITAN_CHECK(gguf_type(scales) == GgmlType::q8_0, "[quantize] a gguf weight is encoded as q8_0 only (",
              ggml_type_info(gguf_type(scales)).name, " is read, not written)");
  const Tensor w32 = w.dtype() == DType::f32 ? w : w.to(DType::f32);
  ggml_quantize_q8_0(w32.data<float>(), codes.data<uint8_t>(), w.numel());
}

void dequantize_gguf_rows(const Tensor& codes, const Tensor& scales, Tensor& out, int64_t ob, int64_t oe) {
  const GgmlType type = gguf_type(scales);
  const int64_t cols = out.size(1);
  const uint64_t row_bytes = ggml_row_bytes(ggml_type_info(type), cols);
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t o = ob; o < oe; ++o) {
    float* dst = out.dtype() == DType::f32 ? out.data<float>() + o * cols : row.data();
    ggml_dequantize_row(type, codes.data<uint8_t>() + static_cast<uint64_t>(o) * row_bytes, dst, cols);
    if (out.dtype() == DType::bf16) {
      for (int64_t i = 0; i < cols; ++i) out.data<uint16_t>()[o * cols + i] = f32_to_bf16(row[static_cast<size_t>(i)]);
    }
  }
}
}  // namespace quant

static int64_t flat(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// The codes' and scales' shapes of a weight of `shape` in `kind` (quant_codes / quant_scales); a
// gguf weight's codes are its type's row bytes (q8_0 when `type` is not given).
static Shape codes_shape(QuantKind kind, const Shape& shape, GgmlType type = GgmlType::q8_0) {
  if (kind == QuantKind::gguf) {
    const GgmlTypeInfo& info = ggml_type_info(type);
    const int64_t cols = shape.size() == 2 ? shape[1] : 0;
    TITAN_CHECK(shape.size() == 2 && cols % info.block == 0, "[quantize] a ", info.name, " weight needs rows of whole ",
                info.block, "-element blocks; ", shape_str(shape), " has not");
    return {shape[0] * static_cast<int64_t>(ggml_row_bytes(info, cols))};
  }
  return kind == QuantKind::nf4 ? Shape{(flat(shape) + 1) / 2} : shape;
}
static Shape scales_shape(QuantKind kind, const Shape& shape) {
  if (kind == QuantKind::gguf) return {1};
  if (kind == QuantKind::nf4) return {(flat(shape) + kNf4Block - 1) / kNf4Block};
  return {shape.empty() ? 0 : shape[0]};
}

static void check_packed(const char* op, QuantKind kind, const Shape& shape, const Tensor& codes, const Tensor& scales) {
  const DType code_dtype = codes_dtype(kind);
  const Shape want_scales = scales_shape(kind, shape);
  TITAN_CHECK(scales.dtype() == DType::f32 && scales.shape() == want_scales && scales.is_contiguous(), "[", op,
              "] scales: expected contiguous f32", shape_str(want_scales), " for a ", quant_kind_name(kind),
              " weight ", shape_str(shape), ", got ", scales.describe());
  const Shape want_codes =
      kind == QuantKind::gguf ? codes_shape(kind, shape, quant::gguf_type(scales)) : codes_shape(kind, shape);
  TITAN_CHECK(codes.dtype() == code_dtype && codes.shape() == want_codes && codes.is_contiguous(), "[", op,
              "] codes: expected contiguous ", dtype_name(code_dtype), shape_str(want_codes), " for a ",
              quant_kind_name(kind), " weight ", shape_str(shape), ", got ", codes.describe());
  TITAN_CHECK(scales.dtype() == DType::f32 && scales.shape() == want_scales && scales.is_contiguous(), "[", op,
              "] scales: expected contiguous f32", shape_str(want_scales), " for a ", quant_kind_name(kind),
              " weight ", shape_str(shape), ", got ", scales.describe());
}

Tensor quant_codes(QuantKind kind, const Shape& shape, Device device) {
  return Tensor::zeros(codes_shape(kind, shape), codes_dtype(kind), device);
}

Tensor quant_scales(QuantKind kind, const Shape& shape, Device device) {
  Tensor s = Tensor::zeros(scales_shape(kind, shape), DType::f32, device);
  if (kind == QuantKind::gguf && device != Device::meta) s.data<float>()[0] = static_cast<float>(GgmlType::q8_0);
  return s;
}

void check_quantize(QuantKind kind, const Tensor& w, const Tensor& codes, const Tensor& scales) {
  TITAN_CHECK((w.dtype() == DType::f32 || w.dtype() == DType::bf16) && w.is_contiguous() && w.ndim() == 2,
              "[quantize] w: expected a contiguous f32 or bf16 [out, in] weight, got ", w.describe());
  check_packed("quantize", kind, w.shape(), codes, scales);
}

void check_dequantize(QuantKind kind, const Tensor& codes, const Tensor& scales, const Tensor& out) {
  TITAN_CHECK((out.dtype() == DType::f32 || out.dtype() == DType::bf16) && out.is_contiguous() && out.ndim() == 2,
              "[dequantize] out: expected a contiguous f32 or bf16 [out, in] tensor, got ", out.describe());
  check_packed("dequantize", kind, out.shape(), codes, scales);
}

OpTable<QuantizeImpl>& quantize_table() { return builtin_table<QuantizeImpl>("quantize", register_builtin_quantize); }

OpTable<DequantizeImpl>& dequantize_table() {
  return builtin_table<DequantizeImpl>("dequantize", register_builtin_dequantize);
}

void quantize(QuantKind kind, const Tensor& w_OI, Tensor& codes, Tensor& scales) {
  OpTimer timer("quantize_forward");
  check_quantize(kind, w_OI, codes, scales);
  quantize_table().select(w_OI.device(), w_OI).forward(kind, w_OI, codes, scales);
}

void dequantize(QuantKind kind, const Tensor& codes, const Tensor& scales, Tensor& out_OI) {
  OpTimer timer("dequantize_forward");
  check_dequantize(kind, codes, scales, out_OI);
  dequantize_table().select(codes.device(), codes).forward(kind, codes, scales, out_OI);
}

}  // namespace titan::ops
