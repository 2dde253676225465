// Scalar references for the elementwise passes: one plain loop each, readable as the math in
// elementwise.h (and, by that header's exactness argument, the same bits as any kernel).
#include "titan/ops/elementwise/elementwise.h"

namespace titan::ops {
namespace ref {

void accumulate(int64_t n, float* a, const float* b) {
  for (int64_t i = 0; i < n; ++i) a[i] += b[i];
}

void scale(int64_t n, float* a, float s) {
  for (int64_t i = 0; i < n; ++i) a[i] *= s;
}

double sum_squares(int64_t n, const float* x) {
  double acc[8] = {};
  for (int64_t i = 0; i < n; ++i) acc[i % 8] += static_cast<double>(x[i]) * x[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

}  // namespace ref

static void accumulate_ref(Tensor& a, const Tensor& b) {
  ref::accumulate(a.numel(), a.data<float>(), b.data<float>());
}
static void scale_ref(Tensor& a, float s) { ref::scale(a.numel(), a.data<float>(), s); }
static double sum_squares_ref(const Tensor& x) { return ref::sum_squares(x.numel(), x.data<float>()); }

static void cast_ref(const Tensor& src, Tensor& dst) {
  convert(src.raw_data(), src.dtype(), dst.raw_data(), dst.dtype(), src.numel());
}

CastImpl cast_impl_ref() { return {"cast_ref", Device::cpu, nullptr, cast_ref, nullptr}; }
AccumulateImpl accumulate_impl_ref() { return {"accumulate_ref", Device::cpu, nullptr, accumulate_ref, nullptr}; }
ScaleImpl scale_impl_ref() { return {"scale_ref", Device::cpu, nullptr, scale_ref, nullptr}; }
SumSquaresImpl sum_squares_impl_ref() { return {"sum_squares_ref", Device::cpu, nullptr, sum_squares_ref, nullptr}; }

}  // namespace titan::ops
