// 16-lane float vectors for CPU kernels, one type per ISA level, and the macro that compiles a
// kernel once per level and picks one at run time.
//
// A kernel written with TITAN_SIMD_KERNEL is a template on its vector type `f32x16`, instantiated
// twice: with f32x16_v4 (one zmm register; in a function compiled for x86-64-v4) and with
// f32x16_v3 (two ymm registers; the AVX2 baseline). The same source gives the same lane
// arithmetic in both, so both give the same bits. Why two types and not GCC's target_clones of one
// 64-byte vector: without AVX-512, GCC 12 keeps a 64-byte vector in memory and lowers its
// comparisons and selects one element at a time (a 16-lane max was 16 vmaxss through the stack;
// docs/performance.md (ab)); the v3 type is two 32-byte vectors, which the AVX2 baseline holds in
// registers and compares with vcmpps / vblendvps.
//
// In a kernel: declare vectors as f32x16, load with load16<f32x16>(p) and splat16<f32x16>(x)
// (the one place the type is named), and write comparisons as select(a < b, x, y) instead of
// `a < b ? x : y` (no class type has a ternary). Helpers a kernel defines for itself are
// templates on the vector type as well. Everything here is always_inline (but the v4 fused
// multiply-adds, which say why): the kernel body must be inlined into its per-ISA wrapper, which
// sets the target.
//
// Two rules keep the two instantiations bit-identical, and each the same in every build (the op
// harness's Mode::isa_levels checks the first per op; CI compares the sanitizer build's losses
// with the release build's):
// - A product that feeds an add or a subtract is written as fmadd / fmsub / fnmadd (below), never
//   as `a * b + c`: left to GCC, which product is fused followed the order it evaluated operands
//   in (left to right for v4's built-in operators, right to left for v3's operator functions)
//   and whether a temporary stayed in a register (the v3 struct's did not under AddressSanitizer).
// - Row tails with products go through the same vector arithmetic on partial loads, not scalar
//   loops: GCC vectorizes a scalar loop differently per ISA level, and the roundings followed (a
//   tail of single adds or multiplies may stay scalar: one rounding either way).
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

#include <immintrin.h>

namespace titan::kernels {

constexpr int64_t kLanes = 16;

#define TITAN_SIMD_INLINE [[gnu::always_inline]] inline

// x86-64-v4: the 64-byte GCC vectors, one zmm register each.
using f32x16_v4 = float __attribute__((vector_size(64), aligned(4)));
using i32x16_v4 = int32_t __attribute__((vector_size(64), aligned(4)));

// x86-64-v3 (AVX2): the 16 lanes as two 32-byte vectors, lanes 0-7 in lo.
using f32x8 = float __attribute__((vector_size(32), aligned(4)));
using i32x8 = int32_t __attribute__((vector_size(32), aligned(4)));

struct i32x16_v3 {
  i32x8 lo, hi;
};

struct f32x16_v3 {
  f32x8 lo, hi;
  TITAN_SIMD_INLINE float operator[](int i) const { return i < 8 ? lo[i] : hi[i - 8]; }
  TITAN_SIMD_INLINE f32x16_v3& operator+=(f32x16_v3 b) { lo += b.lo, hi += b.hi; return *this; }
  TITAN_SIMD_INLINE f32x16_v3& operator-=(f32x16_v3 b) { lo -= b.lo, hi -= b.hi; return *this; }
  TITAN_SIMD_INLINE f32x16_v3& operator*=(f32x16_v3 b) { lo *= b.lo, hi *= b.hi; return *this; }
};

// Arithmetic, lane by lane on each half; a float operand is broadcast (as GCC's vectors do).
#define TITAN_SIMD_V3_BINARY(op)                                                                \
  TITAN_SIMD_INLINE f32x16_v3 operator op(f32x16_v3 a, f32x16_v3 b) {                           \
    return {a.lo op b.lo, a.hi op b.hi};                                                        \
  }                                                                                             \
  TITAN_SIMD_INLINE f32x16_v3 operator op(f32x16_v3 a, float b) { return {a.lo op b, a.hi op b}; } \
  TITAN_SIMD_INLINE f32x16_v3 operator op(float a, f32x16_v3 b) { return {a op b.lo, a op b.hi}; }
TITAN_SIMD_V3_BINARY(+)
TITAN_SIMD_V3_BINARY(-)
TITAN_SIMD_V3_BINARY(*)
TITAN_SIMD_V3_BINARY(/)
#undef TITAN_SIMD_V3_BINARY
TITAN_SIMD_INLINE f32x16_v3 operator-(f32x16_v3 a) { return {-a.lo, -a.hi}; }

// Comparisons give lane masks (all ones where true), as GCC's vectors do.
#define TITAN_SIMD_V3_COMPARE(op)                                                             \
  TITAN_SIMD_INLINE i32x16_v3 operator op(f32x16_v3 a, f32x16_v3 b) {                         \
    return {a.lo op b.lo, a.hi op b.hi};                                                      \
  }                                                                                           \
  TITAN_SIMD_INLINE i32x16_v3 operator op(f32x16_v3 a, float b) { return {a.lo op b, a.hi op b}; }
TITAN_SIMD_V3_COMPARE(<)
TITAN_SIMD_V3_COMPARE(>)
TITAN_SIMD_V3_COMPARE(<=)
TITAN_SIMD_V3_COMPARE(>=)
TITAN_SIMD_V3_COMPARE(==)
#undef TITAN_SIMD_V3_COMPARE

// select(mask, a, b): a where the mask is set, b elsewhere.
TITAN_SIMD_INLINE f32x16_v4 select(i32x16_v4 m, f32x16_v4 a, f32x16_v4 b) { return m ? a : b; }
TITAN_SIMD_INLINE f32x16_v3 select(i32x16_v3 m, f32x16_v3 a, f32x16_v3 b) {
  return {m.lo ? a.lo : b.lo, m.hi ? a.hi : b.hi};
}

// Fused multiply-adds, one rounding: fmadd(a, b, c) = a * b + c, fmsub(a, b, c) = a * b - c,
// fnmadd(a, b, c) = c - a * b. A kernel writes every product that feeds an add or a subtract
// through these (simd.h's rule, top): which products GCC contracts by itself depends on how it
// keeps the v3 struct's temporaries, e.g. in memory under AddressSanitizer's use-after-scope
// marks, where a named product was no longer fused and RoPE rounded differently from the release
// build. The v4 ones are compiled for x86-64-v4 (their intrinsics need it) and are not
// always_inline: a kernel's body template has no target of its own, so GCC inlines them once the
// body sits in its x86-64-v4 wrapper (the release binary has no out-of-line copy).
#ifdef __clang__
// clang contracts only a * b + c written as one expression (llvm.fmuladd, its default
// -ffp-contract=on), so that is explicit enough there; its intrinsics would not be inlined into a
// body template compiled without AVX-512.
#define TITAN_SIMD_FUSED_V4(name, expr) \
  TITAN_SIMD_INLINE f32x16_v4 name(f32x16_v4 a, f32x16_v4 b, f32x16_v4 c) { return expr; }
#else
#define TITAN_SIMD_FUSED_V4(name, expr)                                                          \
  [[gnu::target("arch=x86-64-v4")]] inline f32x16_v4 name(f32x16_v4 a, f32x16_v4 b, f32x16_v4 c) { \
    return f32x16_v4(_mm512_##name##_ps(__m512(a), __m512(b), __m512(c)));                        \
  }
#endif
#define TITAN_SIMD_FUSED(name, expr)                                                      \
  TITAN_SIMD_FUSED_V4(name, expr)                                                         \
  TITAN_SIMD_INLINE f32x16_v3 name(f32x16_v3 a, f32x16_v3 b, f32x16_v3 c) {               \
    return {f32x8(_mm256_##name##_ps(__m256(a.lo), __m256(b.lo), __m256(c.lo))),          \
            f32x8(_mm256_##name##_ps(__m256(a.hi), __m256(b.hi), __m256(c.hi)))};         \
  }
TITAN_SIMD_FUSED(fmadd, a * b + c)
TITAN_SIMD_FUSED(fmsub, a * b - c)
TITAN_SIMD_FUSED(fnmadd, c - a * b)
#undef TITAN_SIMD_FUSED
#undef TITAN_SIMD_FUSED_V4

// Loads, stores, broadcasts. The v3 ones go through the AVX intrinsics: a memcpy into the
// struct's halves made GCC assemble each ymm from two xmm stores (a store-forwarding stall).
template <class V>
V load16(const float* p);
template <>
TITAN_SIMD_INLINE f32x16_v4 load16<f32x16_v4>(const float* p) {
  f32x16_v4 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
template <>
TITAN_SIMD_INLINE f32x16_v3 load16<f32x16_v3>(const float* p) {
  return {f32x8(_mm256_loadu_ps(p)), f32x8(_mm256_loadu_ps(p + 8))};
}
TITAN_SIMD_INLINE void store16(float* p, f32x16_v4 v) { std::memcpy(p, &v, sizeof(v)); }
TITAN_SIMD_INLINE void store16(float* p, f32x16_v3 v) {
  _mm256_storeu_ps(p, __m256(v.lo));
  _mm256_storeu_ps(p + 8, __m256(v.hi));
}
template <class V>
TITAN_SIMD_INLINE V splat16(float x) {
  V v = {};
  return v + x;
}

// The first n (< 16) lanes from p, zero elsewhere; and their store.
template <class V>
TITAN_SIMD_INLINE V load16_partial(const float* p, int64_t n) {
  float lanes[kLanes] = {};
  for (int64_t i = 0; i < n; ++i) lanes[i] = p[i];
  return load16<V>(lanes);
}
template <class V>
TITAN_SIMD_INLINE void store16_partial(float* p, V v, int64_t n) {
  float lanes[kLanes];
  store16(lanes, v);
  for (int64_t i = 0; i < n; ++i) p[i] = lanes[i];
}

// x with lanes n.. replaced by `fill` (n <= 0: every lane; n >= 16: none).
TITAN_SIMD_INLINE f32x16_v4 keep_first(f32x16_v4 x, int64_t n, float fill) {
  const i32x16_v4 iota = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  return iota < static_cast<int32_t>(n) ? x : splat16<f32x16_v4>(fill);
}
TITAN_SIMD_INLINE f32x16_v3 keep_first(f32x16_v3 x, int64_t n, float fill) {
  const i32x8 iota = {0, 1, 2, 3, 4, 5, 6, 7};
  const int32_t n32 = static_cast<int32_t>(n);
  return {iota < n32 ? x.lo : f32x8{} + fill, iota + 8 < n32 ? x.hi : f32x8{} + fill};
}

// Pairwise tree: fixed order.
template <class V>
TITAN_SIMD_INLINE float hsum16(V v) {
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = v[i] + v[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}
template <class V>
TITAN_SIMD_INLINE float hmax16(V v) {
  float m = v[0];
  for (int i = 1; i < 16; ++i) m = v[i] > m ? v[i] : m;
  return m;
}
template <class V>
TITAN_SIMD_INLINE V max16(V a, V b) {
  return select(a > b, a, b);
}

namespace simd_detail {
// exp on any GCC float vector F with int vector I of the same lanes (16 for v4, each half of v3).
template <class F, class I>
TITAN_SIMD_INLINE F exp_lanes(F x) {
  const F hi = F{} + 88.3762626647949f, lo = F{} + -87.3365478515625f;
  x = x > hi ? hi : x;
  const auto underflow = x < lo;
  x = x < lo ? lo : x;
  const F fx = x * 1.44269504088896341f + 0.5f;  // k = floor(x * log2(e) + 1/2)
  F kf = __builtin_convertvector(__builtin_convertvector(fx, I), F);
  kf = kf > fx ? kf - 1.0f : kf;  // truncation -> floor for negatives
  const I ki = __builtin_convertvector(kf, I);
  F r = x - kf * 0.693359375f;
  r = r + kf * 2.12194440e-4f;
  F p = F{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  I bits = (ki + 127) << 23;
  F scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  F out = p * scale;
  return underflow ? F{} : out;
}
}  // namespace simd_detail

// exp(x) for f32 lanes: Cody-Waite range reduction x = k*ln2 + r, degree-6 polynomial on r,
// 2^k through the exponent bits. Max rel. error ~2 ulp over [-87, 88]; inputs below -87
// flush to 0 (what softmax needs); inputs above ~88.38 are clamped there (~2.4e38, finite).
TITAN_SIMD_INLINE f32x16_v4 exp16(f32x16_v4 x) { return simd_detail::exp_lanes<f32x16_v4, i32x16_v4>(x); }
TITAN_SIMD_INLINE f32x16_v3 exp16(f32x16_v3 x) {
  return {simd_detail::exp_lanes<f32x8, i32x8>(x.lo), simd_detail::exp_lanes<f32x8, i32x8>(x.hi)};
}

// Whether the CPU has x86-64-v4: the AVX2 baseline (checked at start-up) plus AVX-512 F, BW, CD,
// DQ and VL, what GCC means by arch=x86-64-v4 (spelled out: clang 14 knows no "x86-64-v4").
inline bool simd_v4_supported() {
#ifdef TITAN_BASELINE_ONLY
  return false;
#else
  static const bool v4 = (__builtin_cpu_init(), __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512cd") &&
                          __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"));
  return v4;
#endif
}

// Set by SimdBaselineScope only (tests: both instantiations of every kernel on one machine).
inline std::atomic<bool> simd_baseline_forced{false};

// Whether TITAN_SIMD_KERNELs run their x86-64-v4 instantiation.
inline bool simd_v4() {
  return simd_v4_supported() && !simd_baseline_forced.load(std::memory_order_relaxed);
}

// Runs the AVX2 instantiations of the TITAN_SIMD_KERNELs for its lifetime, on a CPU that has
// x86-64-v4 too. Set it outside parallel regions.
class SimdBaselineScope {
 public:
  SimdBaselineScope() : saved_(simd_baseline_forced.exchange(true)) {}
  ~SimdBaselineScope() { simd_baseline_forced.store(saved_); }
  SimdBaselineScope(const SimdBaselineScope&) = delete;
  SimdBaselineScope& operator=(const SimdBaselineScope&) = delete;

 private:
  bool saved_;
};

// A kernel compiled for both ISA levels:
//
//   TITAN_SIMD_KERNEL(static void, scale_range, (float* a, float s, int64_t n), (a, s, n)) {
//     const f32x16 sv = splat16<f32x16>(s);
//     ...
//   }
//
// defines `name` (the signature given; it dispatches on simd_v4()), name_v4 and name_v3 (the two
// instantiations, callable directly, e.g. by a test) and the body template name_body<f32x16>.
// `args` names the parameters in order. A build with TITAN_BASELINE_ONLY (CMake option) compiles
// the v3 instantiation alone, so the test suite can run the path an AVX2-only machine takes on
// an AVX-512 machine.
//
// A body may ignore f32x16: a plain loop that GCC vectorizes by itself (the casts, AdamW) is
// compiled per ISA level the same way, behind the same switch, so SimdBaselineScope (the op
// harness's Mode::isa_levels) runs its AVX2 code on an AVX-512 machine too. (Such loops were GCC
// target_clones once, which the loader resolves for the process: the AVX2 clone could not be
// run, so not compared, where the x86-64-v4 one is picked.)
#ifdef TITAN_BASELINE_ONLY
#define TITAN_SIMD_KERNEL(ret, name, params, args)                                     \
  template <class f32x16>                                                              \
  TITAN_SIMD_INLINE ret name##_body params;                                            \
  ret name##_v3 params { return name##_body<::titan::kernels::f32x16_v3> args; }       \
  ret name params { return name##_v3 args; }                                           \
  template <class f32x16>                                                              \
  TITAN_SIMD_INLINE ret name##_body params
#else
#define TITAN_SIMD_KERNEL(ret, name, params, args)                                     \
  template <class f32x16>                                                              \
  TITAN_SIMD_INLINE ret name##_body params;                                            \
  [[gnu::target("arch=x86-64-v4")]] ret name##_v4 params {                             \
    return name##_body<::titan::kernels::f32x16_v4> args;                              \
  }                                                                                    \
  ret name##_v3 params { return name##_body<::titan::kernels::f32x16_v3> args; }       \
  ret name params { return ::titan::kernels::simd_v4() ? name##_v4 args : name##_v3 args; } \
  template <class f32x16>                                                              \
  TITAN_SIMD_INLINE ret name##_body params
#endif

// In a plain-loop body the same rule as simd.h's first: a product that feeds an add is either
// std::fma (fused) or rounded_product(a, b) (rounded on its own, never fused), not `a * b + c`.
// Left to GCC, a running sum `acc += a[x] * b[x]` is unfused in the vectorized loop (an in-order
// reduction: a vector multiply, then lane-by-lane adds) and fused in the scalar remainder, whose
// length follows the vector width, so the AVX2 and the AVX-512 code differ (gated_delta.md).
[[gnu::always_inline]] inline float rounded_product(float a, float b) {
#ifdef __clang__
  return a * b;  // clang fuses only a * b + c written as one expression (-ffp-contract=on)
#else
  return __builtin_assoc_barrier(a * b);
#endif
}

}  // namespace titan::kernels
