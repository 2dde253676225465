// quantize / dequantize on CPU: the reference's per-element math (quant::), split over NF4 blocks
// or int8 rows, so every thread count gives the reference's bits. Dequantize is on the frozen
// base's GEMM path (every use of the weight), so it decodes byte-wise into the output dtype.
#include <algorithm>
#include <cmath>

#include "titan/core/parallel.h"
#include "titan/ops/quantize/quantize.h"

namespace titan::ops {
namespace {

// Elements [begin, end) of w as f32 into buf.
void load_range(const Tensor& w, int64_t begin, int64_t end, float* buf) {
  if (w.dtype() == DType::bf16) {
    const uint16_t* p = w.data<uint16_t>();
    for (int64_t i = begin; i < end; ++i) buf[i - begin] = bf16_to_f32(p[i]);
  } else {
    std::copy(w.data<float>() + begin, w.data<float>() + end, buf);
  }
}

void quantize_cpu(QuantKind kind, const Tensor& w, Tensor& codes, Tensor& scales) {
  if (kind == QuantKind::gguf) return quant::quantize_gguf(w, codes, scales);
  const int64_t n = w.numel(), rows = w.size(0), cols = w.size(1);
  float* s = scales.data<float>();
  if (kind == QuantKind::int8) {
    int8_t* q = codes.data<int8_t>();
    parallel_for(rows, 1, [&](int64_t ob, int64_t oe) {
      std::vector<float> buf(static_cast<size_t>(cols));
      for (int64_t o = ob; o < oe; ++o) {
        load_range(w, o * cols, (o + 1) * cols, buf.data());
        float absmax = 0.0f;
        for (float v : buf) absmax = std::max(absmax, std::fabs(v));
        s[o] = absmax;
        const float factor = quant::int8_factor(absmax);
        for (int64_t i = 0; i < cols; ++i) q[o * cols + i] = absmax > 0.0f ? quant::int8_code(buf[i], factor) : 0;
      }
    });
    return;
  }
  uint8_t* q = codes.data<uint8_t>();
  const int64_t blocks = (n + kNf4Block - 1) / kNf4Block;
  parallel_for(blocks, 64, [&](int64_t bb, int64_t be) {  // a block is 32 whole bytes: no byte is shared
    float buf[kNf4Block];
    for (int64_t b = bb; b < be; ++b) {
      const int64_t begin = b * kNf4Block, end = std::min(n, begin + kNf4Block);
      load_range(w, begin, end, buf);
      float absmax = 0.0f;
      for (int64_t i = 0; i < end - begin; ++i) absmax = std::max(absmax, std::fabs(buf[i]));
      s[b] = absmax;
      const float inverse = quant::nf4_inverse(absmax);
      for (int64_t i = begin; i < end; i += 2) {
        const uint8_t hi = quant::nf4_code(buf[i - begin], inverse);
        const uint8_t lo = i + 1 < end ? quant::nf4_code(buf[i + 1 - begin], inverse) : uint8_t{7};
        q[i / 2] = static_cast<uint8_t>(hi << 4 | lo);
      }
    }
  });
}

template <class Out>
void dequantize_rows(QuantKind kind, const Tensor& codes, const float* s, int64_t cols, int64_t ob, int64_t oe,
                     Out* out) {
  const auto put = [](Out* p, float v) {
    if constexpr (std::is_same_v<Out, float>) {
      *p = v;
    } else {
      *p = f32_to_bf16(v);
    }
  };
  if (kind == QuantKind::int8) {
    const int8_t* q = codes.data<int8_t>();
    for (int64_t i = ob * cols; i < oe * cols; ++i) put(out + i, quant::int8_value(q[i], s[i / cols]));
    return;
  }
  const uint8_t* q = codes.data<uint8_t>();
  for (int64_t i = ob * cols; i < oe * cols; ++i) {
    const uint8_t byte = q[i / 2];
    put(out + i, kNf4[i % 2 ? byte & 15 : byte >> 4] * s[i / kNf4Block]);
  }
}

void dequantize_cpu(QuantKind kind, const Tensor& codes, const Tensor& scales, Tensor& out) {
  if (kind == QuantKind::gguf) {
    parallel_for(out.size(0), 4, [&](int64_t ob, int64_t oe) { quant::dequantize_gguf_rows(codes, scales, out, ob, oe); });
    return;
  }
  const int64_t rows = out.size(0), cols = out.size(1);
  const float* s = scales.data<float>();
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t ob, int64_t oe) {
    if (out.dtype() == DType::bf16) {
      dequantize_rows(kind, codes, s, cols, ob, oe, out.data<uint16_t>());
    } else {
      dequantize_rows(kind, codes, s, cols, ob, oe, out.data<float>());
    }
  });
}

}  // namespace

QuantizeImpl quantize_impl_cpu() { return {"quantize_cpu", Device::cpu, nullptr, quantize_cpu, nullptr}; }
DequantizeImpl dequantize_impl_cpu() { return {"dequantize_cpu", Device::cpu, nullptr, dequantize_cpu, nullptr}; }

}  // namespace titan::ops
