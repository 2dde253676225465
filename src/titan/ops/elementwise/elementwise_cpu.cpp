// The elementwise passes on CPU: streaming loops, memory bound. accumulate and scale split the
// flat array over threads (elementwise, so the split does not change a bit) and use 16-lane f32
// vectors; sum_squares runs on the calling thread (its order is the contract; the caller chunks)
// with its 8 fp64 accumulators as vector lanes.
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/cast.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/kernels/cpu/sum_squares.h"
#include "titan/ops/elementwise/elementwise.h"

namespace titan::ops {

using namespace titan::kernels;

// Elements per thread chunk at least: below this the fork costs more than the work. The values
// the host loops these ops replace used (nn::add_inplace, the clip scaling).
constexpr int64_t kAccumulateGrain = 1 << 14;
constexpr int64_t kScaleGrain = 1 << 15;

TITAN_SIMD_KERNEL(static void, accumulate_range,
                  (float* a, const float* b, int64_t begin, int64_t end),
                  (a, b, begin, end)) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) store16(a + i, load16<f32x16>(a + i) + load16<f32x16>(b + i));
  for (; i < end; ++i) a[i] += b[i];
}

TITAN_SIMD_KERNEL(static void, scale_range,
                  (float* a, float s, int64_t begin, int64_t end),
                  (a, s, begin, end)) {
  const f32x16 sv = splat16<f32x16>(s);
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) store16(a + i, load16<f32x16>(a + i) * sv);
  for (; i < end; ++i) a[i] *= s;
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

static double sum_squares_cpu(const Tensor& x) { return sum_squares_f32(x.data<float>(), x.numel()); }

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
