// The elementwise passes on CPU: streaming loops, memory bound. accumulate and scale split the
// flat array over threads (elementwise, so the split does not change a bit) and use 16-lane f32
// vectors; sum_squares runs on the calling thread (its order is the contract; the caller chunks)
// with its 8 fp64 accumulators as vector lanes.
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/cast.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/elementwise/elementwise.h"

namespace titan::ops {

using namespace titan::kernels;

// Elements per thread chunk at least: below this the fork costs more than the work. The values
// the host loops these ops replace used (nn::add_inplace, the clip scaling).
constexpr int64_t kAccumulateGrain = 1 << 14;
constexpr int64_t kScaleGrain = 1 << 15;

TITAN_CPU_MULTIVERSION
static void accumulate_range(float* a, const float* b, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) store16(a + i, load16(a + i) + load16(b + i));
  for (; i < end; ++i) a[i] += b[i];
}

TITAN_CPU_MULTIVERSION
static void scale_range(float* a, float s, int64_t begin, int64_t end) {
  const f32x16 sv = splat16(s);
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) store16(a + i, load16(a + i) * sv);
  for (; i < end; ++i) a[i] *= s;
}

// acc[k] takes elements k, k + 8, k + 16, ... (the whole blocks of 8, then the tail from k = 0):
// element i always lands in acc[i % 8], the contract's order. The inner loop over k is what GCC
// turns into fp64 vector lanes; the lanes never mix until the final fixed tree.
TITAN_CPU_MULTIVERSION
static double sum_squares_range(const float* x, int64_t n) {
  double acc[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) acc[k] += static_cast<double>(x[i + k]) * x[i + k];
  }
  for (int k = 0; i < n; ++i, ++k) acc[k] += static_cast<double>(x[i]) * x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

static void accumulate_cpu(Tensor& a, const Tensor& b) {
  float* ap = a.data<float>();
  const float* bp = b.data<float>();
  parallel_for(a.numel(), kAccumulateGrain,
               [&](int64_t begin, int64_t end) { accumulate_range(ap, bp, begin, end); });
}

static void scale_cpu(Tensor& a, float s) {
  float* ap = a.data<float>();
  parallel_for(a.numel(), kScaleGrain, [&](int64_t begin, int64_t end) { scale_range(ap, s, begin, end); });
}

static double sum_squares_cpu(const Tensor& x) { return sum_squares_range(x.data<float>(), x.numel()); }

constexpr int64_t kCastGrain = 1 << 15;

static void cast_cpu(const Tensor& src, Tensor& dst) {
  if (src.dtype() == DType::f32) {
    const float* s = src.data<float>();
    uint16_t* d = dst.data<uint16_t>();
    parallel_for(src.numel(), kCastGrain, [&](int64_t b, int64_t e) { cast_f32_to_bf16(s + b, d + b, e - b); });
  } else {
    const uint16_t* s = src.data<uint16_t>();
    float* d = dst.data<float>();
    parallel_for(src.numel(), kCastGrain, [&](int64_t b, int64_t e) { cast_bf16_to_f32(s + b, d + b, e - b); });
  }
}

CastImpl cast_impl_cpu() { return {"cast_cpu", Device::cpu, nullptr, cast_cpu, nullptr}; }
AccumulateImpl accumulate_impl_cpu() { return {"accumulate_cpu", Device::cpu, nullptr, accumulate_cpu, nullptr}; }
ScaleImpl scale_impl_cpu() { return {"scale_cpu", Device::cpu, nullptr, scale_cpu, nullptr}; }
SumSquaresImpl sum_squares_impl_cpu() { return {"sum_squares_cpu", Device::cpu, nullptr, sum_squares_cpu, nullptr}; }

}  // namespace titan::ops
