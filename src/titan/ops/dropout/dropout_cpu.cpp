// Dropout on CPU: the elements split over threads; each draws its own counter (Rng::uniform(e)),
// so the mask does not depend on the split.
#include <algorithm>

#include "titan/core/parallel.h"
#include "titan/core/rng.h"
#include "titan/ops/dropout/dropout.h"

namespace titan::ops {

namespace {

void apply_cpu(const Tensor& x, const DropoutArgs& a, Tensor& y) {
  const Rng rng(a.seed, a.stream);
  const float s = static_cast<float>(1.0 / (1.0 - a.p));
  const float* in = x.data<float>();
  float* out = y.data<float>();
  parallel_for(x.numel(), 16384, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = static_cast<double>(rng.uniform(static_cast<uint64_t>(i))) >= a.p ? in[i] * s : 0.0f;
  });
}

}  // namespace

DropoutImpl dropout_impl_cpu() { return {"dropout_cpu", Device::cpu, nullptr, apply_cpu, apply_cpu}; }

}  // namespace titan::ops
