// Scalar references for quantize / dequantize: one plain loop over the elements each.
#include "titan/ops/quantize/quantize.h"

#include <algorithm>
#include <cmath>

namespace titan::ops {
namespace {

float load(const Tensor& w, int64_t i) {
  return w.dtype() == DType::bf16 ? bf16_to_f32(w.data<uint16_t>()[i]) : w.data<float>()[i];
}

void store(Tensor& out, int64_t i, float v) {
  if (out.dtype() == DType::bf16) {
    out.data<uint16_t>()[i] = f32_to_bf16(v);
  } else {
    out.data<float>()[i] = v;
  }
}

void quantize_ref(QuantKind kind, const Tensor& w, Tensor& codes, Tensor& scales) {
  if (kind == QuantKind::gguf) return quant::quantize_gguf(w, codes, scales);
  const int64_t n = w.numel(), rows = w.size(0), cols = w.size(1);
  float* s = scales.data<float>();
  if (kind == QuantKind::int8) {
    int8_t* q = codes.data<int8_t>();
    for (int64_t o = 0; o < rows; ++o) {
      float absmax = 0.0f;
      for (int64_t i = 0; i < cols; ++i) absmax = std::max(absmax, std::fabs(load(w, o * cols + i)));
      s[o] = absmax;
      const float factor = quant::int8_factor(absmax);
      for (int64_t i = 0; i < cols; ++i) q[o * cols + i] = absmax > 0.0f ? quant::int8_code(load(w, o * cols + i), factor) : 0;
    }
    return;
  }
  uint8_t* q = codes.data<uint8_t>();
  std::fill(q, q + codes.numel(), uint8_t{0});
  for (int64_t b = 0; b * kNf4Block < n; ++b) {
    const int64_t begin = b * kNf4Block, end = std::min(n, begin + kNf4Block);
    float absmax = 0.0f;
    for (int64_t i = begin; i < end; ++i) absmax = std::max(absmax, std::fabs(load(w, i)));
    s[b] = absmax;
    const float inverse = quant::nf4_inverse(absmax);
    for (int64_t i = begin; i < end; ++i) q[i / 2] |= quant::nf4_code(load(w, i), inverse) << (i % 2 ? 0 : 4);
  }
  if (n % 2) q[n / 2] |= 7;  // the pad: the code of 0
}

void dequantize_ref(QuantKind kind, const Tensor& codes, const Tensor& scales, Tensor& out) {
  if (kind == QuantKind::gguf) return quant::dequantize_gguf_rows(codes, scales, out, 0, out.size(0));
  const int64_t n = out.numel(), cols = out.size(1);
  const float* s = scales.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    if (kind == QuantKind::int8) {
      store(out, i, quant::int8_value(codes.data<int8_t>()[i], s[i / cols]));
    } else {
      const uint8_t byte = codes.data<uint8_t>()[i / 2];
      store(out, i, kNf4[i % 2 ? byte & 15 : byte >> 4] * s[i / kNf4Block]);
    }
  }
}

}  // namespace

QuantizeImpl quantize_impl_ref() { return {"quantize_ref", Device::cpu, nullptr, quantize_ref, nullptr}; }
DequantizeImpl dequantize_impl_ref() { return {"dequantize_ref", Device::cpu, nullptr, dequantize_ref, nullptr}; }

}  // namespace titan::ops
