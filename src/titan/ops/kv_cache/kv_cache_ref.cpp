// The scalar reference of kv_cache_append: kv_cache.h's formula, one element at a time.
#include "titan/ops/kv_cache/kv_cache.h"

namespace titan::ops {

static void kv_cache_append_ref(const Tensor& x_BSGK, int64_t start, Tensor& cache_BCGK) {
  const int64_t B = x_BSGK.size(0), S = x_BSGK.size(1), C = cache_BCGK.size(1);
  const int64_t row = x_BSGK.size(2) * x_BSGK.size(3);  // G * K floats per token
  const float* x = x_BSGK.data<float>();
  float* cache = cache_BCGK.data<float>();
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      for (int64_t i = 0; i < row; ++i) cache[(b * C + start + s) * row + i] = x[(b * S + s) * row + i];
    }
  }
}

KvCacheAppendImpl kv_cache_append_impl_ref() {
  return {"kv_cache_append_ref", Device::cpu, nullptr, kv_cache_append_ref, nullptr};
}

}  // namespace titan::ops
