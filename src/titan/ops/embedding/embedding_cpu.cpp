// Embedding on CPU. Forward: rows split over threads, one memcpy per row (a gather; nothing to
// compute). Backward: the D columns split over threads in 16-lane blocks, each thread walking
// every id in order over its own columns, so no two threads touch the same dtable element and
// each element sums its rows in id order, the reference's order: no atomics, and the same bits
// as the reference for any thread count.
#include <algorithm>
#include <cstring>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/cast.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/embedding/embedding.h"

namespace titan::ops {

using namespace titan::kernels;

// Exactly one of ids64 / ids32 is set: a branch per id keeps one kernel for both id types.
static inline int64_t id_at(const int64_t* ids64, const int32_t* ids32, int64_t i) {
  return ids64 != nullptr ? ids64[i] : static_cast<int64_t>(ids32[i]);
}

TITAN_SIMD_KERNEL(static void, backward_cols,
                  (int64_t c0, int64_t c1, int64_t n, int64_t d, const int64_t* ids64, const int32_t* ids32,
                   const float* dy, float* dtable),
                  (c0, c1, n, d, ids64, ids32, dy, dtable)) {
  for (int64_t i = 0; i < n; ++i) {
    float* row = dtable + id_at(ids64, ids32, i) * d;
    const float* g = dy + i * d;
    int64_t j = c0;
    for (; j + kLanes <= c1; j += kLanes) store16(row + j, load16<f32x16>(row + j) + load16<f32x16>(g + j));
    for (; j < c1; ++j) row[j] += g[j];
  }
}

static void forward_cpu(const Tensor& ids, const Tensor& table, Tensor& y) {
  const int64_t d = table.size(1);
  const int64_t* ids64 = ids.dtype() == DType::i64 ? ids.data<int64_t>() : nullptr;
  const int32_t* ids32 = ids.dtype() == DType::i32 ? ids.data<int32_t>() : nullptr;
  float* yp = y.data<float>();
  if (table.dtype() == DType::bf16) {
    const uint16_t* th = table.data<uint16_t>();
    parallel_for(ids.numel(), 64, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) cast_bf16_to_f32(th + id_at(ids64, ids32, i) * d, yp + i * d, d);
    });
    return;
  }
  const float* tp = table.data<float>();
  const size_t row_bytes = static_cast<size_t>(d) * sizeof(float);
  parallel_for(ids.numel(), 64, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memcpy(yp + i * d, tp + id_at(ids64, ids32, i) * d, row_bytes);
  });
}

static void backward_cpu(const Tensor& ids, const Tensor& dy, Tensor& dtable) {
  const int64_t n = ids.numel(), d = dtable.size(1);
  const int64_t* ids64 = ids.dtype() == DType::i64 ? ids.data<int64_t>() : nullptr;
  const int32_t* ids32 = ids.dtype() == DType::i32 ? ids.data<int32_t>() : nullptr;
  const float* dyp = dy.data<float>();
  float* dtp = dtable.data<float>();
  // Column blocks of 16 floats (one cache line when rows are 64-byte aligned), at least 4 per
  // thread so threads rarely share a line.
  const int64_t num_blocks = (d + kLanes - 1) / kLanes;
  parallel_for(num_blocks, 4, [&](int64_t b, int64_t e) {
    backward_cols(b * kLanes, std::min(d, e * kLanes), n, d, ids64, ids32, dyp, dtp);
  });
}

EmbeddingImpl embedding_impl_cpu() {
  return {"embedding_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu};
}

}  // namespace titan::ops
