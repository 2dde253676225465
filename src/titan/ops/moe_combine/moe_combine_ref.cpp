// Scalar reference for the MoE combine: per token, plain loops over its k rows, sums in double.
#include <vector>

#include "titan/ops/moe_combine/moe_combine.h"

namespace titan::ops {
namespace ref {

template <class T>
void moe_combine_forward(int64_t n, int64_t d, int64_t top_k, const T* y, const T* weight,
                         const int32_t* row_of_pair, T* out) {
  std::vector<double> acc(d);
  for (int64_t t = 0; t < n; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t q = t * top_k + k;
      const double w = weight != nullptr ? static_cast<double>(weight[q]) : 1.0;
      for (int64_t i = 0; i < d; ++i) acc[i] += w * y[row_of_pair[q] * d + i];
    }
    for (int64_t i = 0; i < d; ++i) out[t * d + i] = static_cast<T>(acc[i]);
  }
}

template <class T>
void moe_combine_backward(int64_t n, int64_t d, int64_t top_k, const T* dout, const T* y,
                          const T* weight, const int32_t* row_of_pair, T* dy, T* dweight) {
  for (int64_t q = 0; q < n * top_k; ++q) {
    const T* g = dout + (q / top_k) * d;
    const int64_t r = row_of_pair[q];
    const double w = weight != nullptr ? static_cast<double>(weight[q]) : 1.0;
    for (int64_t i = 0; i < d; ++i) dy[r * d + i] = static_cast<T>(w * g[i]);
    if (weight == nullptr) continue;
    double acc = 0.0;
    for (int64_t i = 0; i < d; ++i) acc += static_cast<double>(g[i]) * y[r * d + i];
    dweight[q] = static_cast<T>(acc);
  }
}

#define TITAN_MOE_COMBINE_REF_INSTANTIATE(T)                                                       \
  template void moe_combine_forward<T>(int64_t, int64_t, int64_t, const T*, const T*,              \
                                       const int32_t*, T*);                                        \
  template void moe_combine_backward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*,   \
                                        const int32_t*, T*, T*);
TITAN_MOE_COMBINE_REF_INSTANTIATE(float)
TITAN_MOE_COMBINE_REF_INSTANTIATE(double)
#undef TITAN_MOE_COMBINE_REF_INSTANTIATE

}  // namespace ref

static void forward_ref(const Tensor& y, const Tensor& weight, const Tensor& row_of_pair,
                        Tensor& out) {
  ref::moe_combine_forward(out.size(0), out.size(1), row_of_pair.size(1), y.data<float>(),
                           weight.defined() ? weight.data<float>() : nullptr,
                           row_of_pair.data<int32_t>(), out.data<float>());
}

static void backward_ref(const Tensor& dout, const Tensor& y, const Tensor& weight,
                         const Tensor& row_of_pair, Tensor& dy, Tensor& dweight) {
  const bool weighted = weight.defined();
  ref::moe_combine_backward(dout.size(0), dout.size(1), row_of_pair.size(1), dout.data<float>(),
                            weighted ? y.data<float>() : nullptr,
                            weighted ? weight.data<float>() : nullptr,
                            row_of_pair.data<int32_t>(), dy.data<float>(),
                            weighted ? dweight.data<float>() : nullptr);
}

MoeCombineImpl moe_combine_impl_ref() {
  return {"moe_combine_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
