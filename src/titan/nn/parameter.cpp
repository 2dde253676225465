#include "titan/nn/parameter.h"

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/simd.h"

namespace titan::nn {

using namespace titan::kernels;

TITAN_CPU_MULTIVERSION
static void add_range(float* a, const float* b, int64_t begin, int64_t end) {
  int64_t i = begin;
  for (; i + kLanes <= end; i += kLanes) store16(a + i, load16(a + i) + load16(b + i));
  for (; i < end; ++i) a[i] += b[i];
}

void add_inplace(Tensor& a, const Tensor& b) {
  TITAN_CHECK(a.numel() == b.numel() && a.is_contiguous() && b.is_contiguous(),
              "[add_inplace] ", a.describe(), " += ", b.describe(), ": sizes differ");
  float* ap = a.data<float>();
  const float* bp = b.data<float>();
  parallel_for(a.numel(), 1 << 14, [&](int64_t begin, int64_t end) { add_range(ap, bp, begin, end); });
}

}  // namespace titan::nn
