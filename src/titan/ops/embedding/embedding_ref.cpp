// Scalar reference for the embedding lookup: plain loops, no threads.
#include "titan/ops/embedding/embedding.h"

namespace titan::ops {
namespace ref {

template <class T, class Id>
void embedding_forward(int64_t n, int64_t d, const Id* ids, const T* table, T* y) {
  for (int64_t i = 0; i < n; ++i) {
    const T* row = table + static_cast<int64_t>(ids[i]) * d;
    for (int64_t j = 0; j < d; ++j) y[i * d + j] = row[j];
  }
}

// Rows are added in id order i = 0, 1, ..., which fixes the summation order for repeated ids.
template <class T, class Id>
void embedding_backward(int64_t n, int64_t d, const Id* ids, const T* dy, T* dtable) {
  for (int64_t i = 0; i < n; ++i) {
    T* row = dtable + static_cast<int64_t>(ids[i]) * d;
    for (int64_t j = 0; j < d; ++j) row[j] += dy[i * d + j];
  }
}

template void embedding_forward<float, int32_t>(int64_t, int64_t, const int32_t*, const float*, float*);
template void embedding_forward<float, int64_t>(int64_t, int64_t, const int64_t*, const float*, float*);
template void embedding_forward<double, int32_t>(int64_t, int64_t, const int32_t*, const double*, double*);
template void embedding_forward<double, int64_t>(int64_t, int64_t, const int64_t*, const double*, double*);
template void embedding_backward<float, int32_t>(int64_t, int64_t, const int32_t*, const float*, float*);
template void embedding_backward<float, int64_t>(int64_t, int64_t, const int64_t*, const float*, float*);
template void embedding_backward<double, int32_t>(int64_t, int64_t, const int32_t*, const double*, double*);
template void embedding_backward<double, int64_t>(int64_t, int64_t, const int64_t*, const double*, double*);

}  // namespace ref

static void forward_ref(const Tensor& ids, const Tensor& table_in, Tensor& y) {
  const int64_t n = ids.numel(), d = table_in.size(1);
  const Tensor table = table_in.dtype() == DType::f32 ? table_in : table_in.to(DType::f32);  // exact
  if (ids.dtype() == DType::i64) {
    ref::embedding_forward(n, d, ids.data<int64_t>(), table.data<float>(), y.data<float>());
  } else {
    ref::embedding_forward(n, d, ids.data<int32_t>(), table.data<float>(), y.data<float>());
  }
}

static void backward_ref(const Tensor& ids, const Tensor& dy, Tensor& dtable) {
  const int64_t n = ids.numel(), d = dtable.size(1);
  if (ids.dtype() == DType::i64) {
    ref::embedding_backward(n, d, ids.data<int64_t>(), dy.data<float>(), dtable.data<float>());
  } else {
    ref::embedding_backward(n, d, ids.data<int32_t>(), dy.data<float>(), dtable.data<float>());
  }
}

EmbeddingImpl embedding_impl_ref() {
  return {"embedding_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
