// kv_cache_append on CPU: one memcpy per batch row (its S new tokens are contiguous in x and in
// the cache), rows split over threads when there is enough to copy. A copy: the split does not
// change a bit.
#include <algorithm>
#include <cstring>

#include "titan/core/parallel.h"
#include "titan/ops/kv_cache/kv_cache.h"

namespace titan::ops {

// Floats per thread chunk at least: below this the fork costs more than the copy.
constexpr int64_t kKvCacheGrain = 1 << 15;

static void kv_cache_append_cpu(const Tensor& x_BSGK, int64_t start, Tensor& cache_BCGK) {
  const int64_t B = x_BSGK.size(0), S = x_BSGK.size(1), C = cache_BCGK.size(1);
  const int64_t row = x_BSGK.size(2) * x_BSGK.size(3);
  const float* x = x_BSGK.data<float>();
  float* cache = cache_BCGK.data<float>();
  const auto bytes = static_cast<size_t>(S * row) * sizeof(float);
  parallel_for(B, std::max<int64_t>(1, kKvCacheGrain / std::max<int64_t>(1, S * row)), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) std::memcpy(cache + (b * C + start) * row, x + b * S * row, bytes);
  });
}

KvCacheAppendImpl kv_cache_append_impl_cpu() {
  return {"kv_cache_append_cpu", Device::cpu, nullptr, kv_cache_append_cpu, nullptr};
}

}  // namespace titan::ops
