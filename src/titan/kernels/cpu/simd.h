// Portable 16-lane float vectors (GCC vector extensions). Kernels written with f32x16 are
// compiled twice via TITAN_CPU_MULTIVERSION: an x86-64-v4 clone (one zmm register per vector)
// and the AVX2 baseline (two ymm registers); the loader picks one from CPUID at start-up.
// The lane layout fixes the summation order, so both clones give the same bits.
// Every helper below is always_inline: a 64-byte vector is passed in a zmm register by the
// AVX-512 clone but in memory by the baseline, so an out-of-line copy (GCC emits one at -O0, and
// at -O2 for exp16) called from the other clone reads garbage arguments.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

// The one attribute macro: without it every kernel would repeat the clone list. A build with
// TITAN_BASELINE_ONLY (CMake option of the same name) compiles the AVX2 baseline alone, so the
// test suite can exercise the path an AVX2-only machine takes on this AVX-512 machine.
#ifdef TITAN_BASELINE_ONLY
#define TITAN_CPU_MULTIVERSION
#else
#define TITAN_CPU_MULTIVERSION __attribute__((target_clones("arch=x86-64-v4", "default")))
#endif

namespace titan::kernels {

using f32x16 = float __attribute__((vector_size(64), aligned(4)));
using i32x16 = int32_t __attribute__((vector_size(64), aligned(4)));
constexpr int64_t kLanes = 16;

[[gnu::always_inline]] inline f32x16 load16(const float* p) {
  f32x16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
[[gnu::always_inline]] inline void store16(float* p, f32x16 v) { std::memcpy(p, &v, sizeof(v)); }
[[gnu::always_inline]] inline f32x16 splat16(float x) { return f32x16{} + x; }
// Loads the first n (< 16) lanes, zero elsewhere.
[[gnu::always_inline]] inline f32x16 load16_partial(const float* p, int64_t n) {
  f32x16 v = {};
  for (int64_t i = 0; i < n; ++i) v[i] = p[i];
  return v;
}
[[gnu::always_inline]] inline void store16_partial(float* p, f32x16 v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = v[i];
}
[[gnu::always_inline]] inline float hsum16(f32x16 v) {
  // Pairwise tree: fixed order.
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = v[i] + v[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}
[[gnu::always_inline]] inline float hmax16(f32x16 v) {
  float m = v[0];
  for (int i = 1; i < 16; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
[[gnu::always_inline]] inline f32x16 max16(f32x16 a, f32x16 b) { return a > b ? a : b; }

// exp(x) for f32 lanes: Cody-Waite range reduction x = k*ln2 + r, degree-6 polynomial on r,
// 2^k through the exponent bits. Max rel. error ~2 ulp over [-87, 88]; inputs below -87
// flush to 0 (what softmax needs), above 88 saturate to +inf.
[[gnu::always_inline]] inline f32x16 exp16(f32x16 x) {
  const f32x16 hi = splat16(88.3762626647949f), lo = splat16(-87.3365478515625f);
  x = x > hi ? hi : x;
  const auto underflow = x < lo;
  x = x < lo ? lo : x;
  const f32x16 fx = x * 1.44269504088896341f + 0.5f;  // k = floor(x * log2(e) + 1/2)
  f32x16 kf = __builtin_convertvector(__builtin_convertvector(fx, i32x16), f32x16);
  kf = kf > fx ? kf - 1.0f : kf;  // truncation -> floor for negatives
  const i32x16 ki = __builtin_convertvector(kf, i32x16);
  f32x16 r = x - kf * 0.693359375f;
  r = r + kf * 2.12194440e-4f;
  f32x16 p = splat16(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  i32x16 bits = (ki + 127) << 23;
  f32x16 scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  f32x16 out = p * scale;
  return underflow ? splat16(0.0f) : out;
}

}  // namespace titan::kernels
