#include "titan/kernels/cpu/cast.h"

#include "titan/core/dtype.h"
#include "titan/kernels/cpu/simd.h"

namespace titan::kernels {

using u32x16 = uint32_t __attribute__((vector_size(64), aligned(4)));
using u16x16 = uint16_t __attribute__((vector_size(32), aligned(2)));

TITAN_CPU_MULTIVERSION
void cast_f32_to_bf16(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    u32x16 u;
    std::memcpy(&u, src + i, sizeof(u));
    const auto is_nan = (u & 0x7fffffffu) > 0x7f800000u;
    const u32x16 rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const u32x16 quiet = (u >> 16) | 0x40u;
    const u16x16 h = __builtin_convertvector(is_nan ? quiet : rounded, u16x16);
    std::memcpy(dst + i, &h, sizeof(h));
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

TITAN_CPU_MULTIVERSION
void cast_bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    u16x16 h;
    std::memcpy(&h, src + i, sizeof(h));
    const u32x16 u = __builtin_convertvector(h, u32x16) << 16;
    std::memcpy(dst + i, &u, sizeof(u));
  }
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace titan::kernels
