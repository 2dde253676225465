// Scalar reference for the MoE dispatch: the layout by scanning the pairs once per expert (the
// definition of a stable sort by expert), then plain row copies and sums.
#include <vector>

#include "titan/ops/moe_dispatch/moe_dispatch.h"

namespace titan::ops {
namespace ref {

template <class T>
void moe_dispatch_forward(int64_t n, int64_t d, int64_t e, int64_t top_k, const T* x,
                          const int32_t* expert, T* x_rows, int64_t* offsets,
                          int32_t* row_of_pair, int32_t* pair_of_row) {
  int64_t row = 0;
  for (int64_t j = 0; j < e; ++j) {
    offsets[j] = row;
    for (int64_t q = 0; q < n * top_k; ++q) {
      if (expert[q] != j) continue;
      row_of_pair[q] = static_cast<int32_t>(row);
      pair_of_row[row] = static_cast<int32_t>(q);
      for (int64_t i = 0; i < d; ++i) x_rows[row * d + i] = x[(q / top_k) * d + i];
      ++row;
    }
  }
  offsets[e] = row;
}

template <class T>
void moe_dispatch_backward(int64_t n, int64_t d, int64_t top_k, const T* dx_rows,
                           const int32_t* row_of_pair, T* dx) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < d; ++i) {
      double acc = dx[t * d + i];
      for (int64_t k = 0; k < top_k; ++k) acc += dx_rows[row_of_pair[t * top_k + k] * d + i];
      dx[t * d + i] = static_cast<T>(acc);
    }
  }
}

#define TITAN_MOE_DISPATCH_REF_INSTANTIATE(T)                                                      \
  template void moe_dispatch_forward<T>(int64_t, int64_t, int64_t, int64_t, const T*,              \
                                        const int32_t*, T*, int64_t*, int32_t*, int32_t*);         \
  template void moe_dispatch_backward<T>(int64_t, int64_t, int64_t, const T*, const int32_t*, T*);
TITAN_MOE_DISPATCH_REF_INSTANTIATE(float)
TITAN_MOE_DISPATCH_REF_INSTANTIATE(double)
#undef TITAN_MOE_DISPATCH_REF_INSTANTIATE

}  // namespace ref

static void forward_ref(const MoeDispatchArgs& args, const Tensor& x, const Tensor& expert,
                        Tensor& x_rows, MoeLayout& layout) {
  const int64_t n = x.size(0), kk = expert.size(1), e = args.num_experts;
  layout.offsets_E1 = Tensor::empty({e + 1}, DType::i64);
  layout.row_of_pair_NK = Tensor::empty({n, kk}, DType::i32);
  layout.pair_of_row_P = Tensor::empty({n * kk}, DType::i32);
  ref::moe_dispatch_forward(n, x.size(1), e, kk, x.data<float>(), expert.data<int32_t>(),
                            x_rows.data<float>(), layout.offsets_E1.data<int64_t>(),
                            layout.row_of_pair_NK.data<int32_t>(),
                            layout.pair_of_row_P.data<int32_t>());
}

static void backward_ref(const MoeDispatchArgs&, const Tensor& dx_rows, const MoeLayout& layout,
                         Tensor& dx) {
  ref::moe_dispatch_backward(dx.size(0), dx.size(1), layout.row_of_pair_NK.size(1),
                             dx_rows.data<float>(), layout.row_of_pair_NK.data<int32_t>(),
                             dx.data<float>());
}

MoeDispatchImpl moe_dispatch_impl_ref() {
  return {"moe_dispatch_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
