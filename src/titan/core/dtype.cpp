#include "titan/core/dtype.h"

#include <immintrin.h>

#include "titan/core/error.h"

namespace titan {

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::f16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
    case DType::f64: return 8;
    case DType::u8: return 1;
    case DType::i8: return 1;
  }
  return 0;
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::f64: return "f64";
    case DType::u8: return "u8";
    case DType::i8: return "i8";
  }
  return "?";
}

// F16C is part of the AVX2 baseline (-mf16c).
float f16_to_f32(uint16_t h) { return _cvtsh_ss(h); }
uint16_t f32_to_f16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }

void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n) {
  auto is_float = [](DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16; };
  TITAN_CHECK(is_float(src_dtype) && is_float(dst_dtype), "[convert] cannot convert ",
              dtype_name(src_dtype), " to ", dtype_name(dst_dtype),
              ". HINT: only f32/bf16/f16 convert to each other");
  auto load = [&](int64_t i) -> float {
    switch (src_dtype) {
      case DType::f32: return static_cast<const float*>(src)[i];
      case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
      default: return f16_to_f32(static_cast<const uint16_t*>(src)[i]);
    }
  };
  for (int64_t i = 0; i < n; ++i) {
    const float v = load(i);
    switch (dst_dtype) {
      case DType::f32: static_cast<float*>(dst)[i] = v; break;
      case DType::bf16: static_cast<uint16_t*>(dst)[i] = f32_to_bf16(v); break;
      default: static_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
    }
  }
}

}  // namespace titan
