// Scalar reference for dropout: one element at a time, the scale in double.
#include "titan/core/rng.h"
#include "titan/ops/dropout/dropout.h"

namespace titan::ops {
namespace ref {

template <class T>
void dropout(int64_t n, double p, uint64_t seed, uint64_t stream, const T* x, T* y) {
  const Rng rng(seed, stream);
  for (int64_t e = 0; e < n; ++e) {
    const bool keep = static_cast<double>(rng.uniform(static_cast<uint64_t>(e))) >= p;
    y[e] = keep ? static_cast<T>(static_cast<double>(x[e]) / (1.0 - p)) : T(0);
  }
}

template void dropout<float>(int64_t, double, uint64_t, uint64_t, const float*, float*);
template void dropout<double>(int64_t, double, uint64_t, uint64_t, const double*, double*);

}  // namespace ref

static void apply_ref(const Tensor& x, const DropoutArgs& a, Tensor& y) {
  ref::dropout(x.numel(), a.p, a.seed, a.stream, x.data<float>(), y.data<float>());
}

DropoutImpl dropout_impl_ref() { return {"dropout_ref", Device::cpu, nullptr, apply_ref, apply_ref}; }

}  // namespace titan::ops
