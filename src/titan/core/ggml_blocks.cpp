#include "titan/core/ggml_blocks.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>

#include "titan/core/dtype.h"
#include "titan/core/error.h"

namespace titan {
namespace {

constexpr int64_t kQK = 256;  // elements of a k-quant block

const std::array<GgmlTypeInfo, 15> kTypes = {{
    {GgmlType::f32, "f32", 1, 4, true},
    {GgmlType::f16, "f16", 1, 2, true},
    {GgmlType::q4_0, "q4_0", 32, 18, true},
    {GgmlType::q4_1, "q4_1", 32, 20, true},
    {GgmlType::q5_0, "q5_0", 32, 22, true},
    {GgmlType::q5_1, "q5_1", 32, 24, true},
    {GgmlType::q8_0, "q8_0", 32, 34, true},
    {GgmlType::q8_1, "q8_1", 32, 36, false},
    {GgmlType::q2_k, "q2_K", kQK, 84, false},
    {GgmlType::q3_k, "q3_K", kQK, 110, false},
    {GgmlType::q4_k, "q4_K", kQK, 144, true},
    {GgmlType::q5_k, "q5_K", kQK, 176, true},
    {GgmlType::q6_k, "q6_K", kQK, 210, true},
    {GgmlType::q8_k, "q8_K", kQK, 292, false},
    {GgmlType::bf16, "bf16", 1, 2, true},
}};

float f16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// The 6-bit scale and min of sub-block j of a q4_k / q5_k block (ggml's get_scale_min_k4).
void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void q8_0_block(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

void q4_0_block(const uint8_t* b, float* y) {
  const float d = f16_at(b);
  const uint8_t* q = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((q[j] & 0xF) - 8);
    y[j + 16] = d * static_cast<float>((q[j] >> 4) - 8);
  }
}

void q4_1_block(const uint8_t* b, float* y) {
  const float d = f16_at(b), m = f16_at(b + 2);
  const uint8_t* q = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(q[j] & 0xF) + m;
    y[j + 16] = d * static_cast<float>(q[j] >> 4) + m;
  }
}

// q5_0 (m == nullptr: x = (q5 - 16) * d) and q5_1 (x = q5 * d + m): element j's fifth bit is bit j
// of the little-endian u32 qh.
void q5_block(const uint8_t* b, bool with_min, float* y) {
  const float d = f16_at(b), m = with_min ? f16_at(b + 2) : 0.0f;
  const uint8_t* p = b + (with_min ? 4 : 2);
  uint32_t qh;
  std::memcpy(&qh, p, 4);
  const uint8_t* q = p + 4;
  for (int j = 0; j < 16; ++j) {
    const int lo = (q[j] & 0xF) | static_cast<int>(((qh >> j) & 1) << 4);
    const int hi = (q[j] >> 4) | static_cast<int>(((qh >> (j + 16)) & 1) << 4);
    if (with_min) {
      y[j] = d * static_cast<float>(lo) + m;
      y[j + 16] = d * static_cast<float>(hi) + m;
    } else {
      y[j] = d * static_cast<float>(lo - 16);
      y[j + 16] = d * static_cast<float>(hi - 16);
    }
  }
}

// q4_k (qh == nullptr) and q5_k share the layout of scales and low nibbles.
void q45_k_block(const uint8_t* b, const uint8_t* scales, const uint8_t* qh, const uint8_t* ql, float* y) {
  const float d = f16_at(b), dmin = f16_at(b + 2);
  int is = 0;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < kQK; j += 64) {
    uint8_t sc, m;
    scale_min_k4(is, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min_k4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) {
      const int hi = qh != nullptr && (qh[l] & u1) ? 16 : 0;
      *y++ = d1 * static_cast<float>((ql[l] & 0xF) + hi) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int hi = qh != nullptr && (qh[l] & u2) ? 16 : 0;
      *y++ = d2 * static_cast<float>((ql[l] >> 4) + hi) - m2;
    }
    ql += 32;
    is += 2;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

void q6_k_block(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = f16_at(b + 208);
  for (int n = 0; n < kQK; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = (d * static_cast<float>(sc[is + 0])) * static_cast<float>(q1);
      y[l + 32] = (d * static_cast<float>(sc[is + 2])) * static_cast<float>(q2);
      y[l + 64] = (d * static_cast<float>(sc[is + 4])) * static_cast<float>(q3);
      y[l + 96] = (d * static_cast<float>(sc[is + 6])) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const GgmlTypeInfo& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == id) return &t;
  }
  return nullptr;
}

const GgmlTypeInfo& ggml_type_info(GgmlType type) {
  const GgmlTypeInfo* info = ggml_type_info(static_cast<uint32_t>(type));
  TITAN_CHECK(info != nullptr, "[ggml] unknown type ", static_cast<uint32_t>(type));
  return *info;
}

bool parse_ggml_type(const std::string& name, GgmlType* out) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const GgmlTypeInfo& t : kTypes) {
    std::string n = t.name;
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
    if (t.decodable && n == lower) {
      *out = t.type;
      return true;
    }
  }
  return false;
}

void ggml_dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  const GgmlTypeInfo& info = ggml_type_info(type);
  TITAN_CHECK(info.decodable, "[ggml] type ", info.name, " is not decoded by titan");
  TITAN_CHECK(n % info.block == 0, "[ggml] a ", info.name, " row of ", n, " elements is not whole blocks of ",
              info.block);
  const auto* p = static_cast<const uint8_t*>(src);
  const int64_t blocks = n / info.block;
  switch (type) {
    case GgmlType::f32:
      std::memcpy(dst, p, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::f16:
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_at(p + 2 * i);
      return;
    case GgmlType::bf16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, p + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      return;
    default:
      break;
  }
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = p + b * info.bytes;
    float* y = dst + b * info.block;
    switch (type) {
      case GgmlType::q8_0: q8_0_block(blk, y); break;
      case GgmlType::q4_0: q4_0_block(blk, y); break;
      case GgmlType::q4_1: q4_1_block(blk, y); break;
      case GgmlType::q5_0: q5_block(blk, false, y); break;
      case GgmlType::q5_1: q5_block(blk, true, y); break;
      case GgmlType::q4_k: q45_k_block(blk, blk + 4, nullptr, blk + 16, y); break;
      case GgmlType::q5_k: q45_k_block(blk, blk + 4, blk + 16, blk + 48, y); break;
      case GgmlType::q6_k: q6_k_block(blk, y); break;
      default: TITAN_FAIL("[ggml] no decoder for ", info.name);
    }
  }
}

void ggml_quantize_q8_0(const float* src, void* dst, int64_t n) {
  TITAN_CHECK(n % 32 == 0, "[ggml] a q8_0 row of ", n, " elements is not whole blocks of 32");
  auto* out = static_cast<uint8_t*>(dst);
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* x = src + b * 32;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* blk = out + b * 34;
    const uint16_t dh = f32_to_f16(d);
    std::memcpy(blk, &dh, 2);
    for (int j = 0; j < 32; ++j) blk[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::round(x[j] * id)));
  }
}

}  // namespace titan
