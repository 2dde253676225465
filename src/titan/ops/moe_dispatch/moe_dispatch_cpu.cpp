// MoE dispatch on CPU: the layout by a stable counting sort of the pairs by expert (serial: O(P)
// integer work), the gather as one memcpy per row (threads over rows). Backward adds each token's
// rows k ascending (threads over tokens), so results do not depend on the thread count.
// Shape legend: N tokens, D model width, E experts, K top_k, P = N*K pairs.
#include <cstring>
#include <vector>

#include "titan/core/parallel.h"
#include "titan/ops/moe_dispatch/moe_dispatch.h"

namespace titan::ops {

// Rows per thread chunk at least in the per-row loops.
constexpr int64_t kRowGrain = 16;

// The layout the forward writes, on x's device: the CPU kernel's memory and, shapes only, the meta
// device's (moe_dispatch_impl_meta).
static void allocate_layout(const MoeDispatchArgs& args, const Tensor& x, const Tensor& expert_NK, MoeLayout& layout) {
  const int64_t n = x.size(0), kk = expert_NK.size(1), e = args.num_experts;
  layout.offsets_E1 = Tensor::zeros({e + 1}, DType::i64, x.device());
  layout.row_of_pair_NK = Tensor::empty({n, kk}, DType::i32, x.device());
  layout.pair_of_row_P = Tensor::empty({n * kk}, DType::i32, x.device());
}

static void forward_cpu(const MoeDispatchArgs& args, const Tensor& x, const Tensor& expert_NK,
                        Tensor& x_rows, MoeLayout& layout) {
  const int64_t n = x.size(0), d = x.size(1), kk = expert_NK.size(1), e = args.num_experts;
  const int64_t p = n * kk;
  allocate_layout(args, x, expert_NK, layout);
  if (n == 0) return;
  const int32_t* expert = expert_NK.data<int32_t>();
  int64_t* offsets = layout.offsets_E1.data<int64_t>();
  int32_t* row_of_pair = layout.row_of_pair_NK.data<int32_t>();
  int32_t* pair_of_row = layout.pair_of_row_P.data<int32_t>();
  std::vector<int64_t> cursor(static_cast<size_t>(e), 0);  // counts, then each expert's next row
  for (int64_t q = 0; q < p; ++q) ++cursor[static_cast<size_t>(expert[q])];
  for (int64_t j = 0; j < e; ++j) offsets[j + 1] = offsets[j] + cursor[static_cast<size_t>(j)];
  std::copy(offsets, offsets + e, cursor.begin());
  for (int64_t q = 0; q < p; ++q) {
    const int64_t r = cursor[static_cast<size_t>(expert[q])]++;
    row_of_pair[q] = static_cast<int32_t>(r);
    pair_of_row[r] = static_cast<int32_t>(q);
  }
  // x_rows[r] = x[pair_of_row[r] / K]
  const float* src = x.data<float>();
  float* rows = x_rows.data<float>();
  parallel_for(p, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(rows + r * d, src + (pair_of_row[r] / kk) * d, sizeof(float) * d);
    }
  });
}

static void backward_cpu(const MoeDispatchArgs&, const Tensor& dx_rows, const MoeLayout& layout,
                         Tensor& dx) {
  const int64_t n = dx.size(0), d = dx.size(1), kk = layout.row_of_pair_NK.size(1);
  if (n == 0) return;
  const int32_t* row_of_pair = layout.row_of_pair_NK.data<int32_t>();
  const float* rows = dx_rows.data<float>();
  float* dxp = dx.data<float>();
  parallel_for(n, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* o = dxp + t * d;
      for (int64_t k = 0; k < kk; ++k) {
        const float* src = rows + row_of_pair[t * kk + k] * d;
        for (int64_t i = 0; i < d; ++i) o[i] += src[i];
      }
    }
  });
}

MoeDispatchImpl moe_dispatch_impl_cpu() {
  return {"moe_dispatch_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu};
}

MoeDispatchImpl moe_dispatch_impl_meta() {
  const auto forward = [](const MoeDispatchArgs& args, const Tensor& x, const Tensor& expert_NK, Tensor&,
                          MoeLayout& layout) { allocate_layout(args, x, expert_NK, layout); };
  return {"moe_dispatch_meta", Device::meta, nullptr, forward, MetaNoop<decltype(MoeDispatchImpl::backward)>::fn};
}

}  // namespace titan::ops
