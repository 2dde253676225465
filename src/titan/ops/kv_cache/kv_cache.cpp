// Contract checks, table and dispatch of kv_cache_append.
#include "titan/ops/kv_cache/kv_cache.h"

#include <string>

#include "titan/ops/builtin.h"

namespace titan::ops {

static std::string found(const Tensor& t) {
  return t.defined() ? t.describe() + " on " + device_name(t.device()) + (t.is_contiguous() ? "" : ", non-contiguous")
                     : std::string("an undefined tensor");
}

void check_kv_cache_append(const Tensor& x_BSGK, int64_t start, const Tensor& cache_BCGK) {
  TITAN_CHECK(x_BSGK.defined() && x_BSGK.ndim() == 4 && x_BSGK.dtype() == DType::f32 && x_BSGK.is_contiguous(),
              "[kv_cache] x_BSGK: expected a contiguous f32 [B, S, G, K] tensor, got ", found(x_BSGK),
              ". HINT: reshape the new keys / values to [B, S, G, K]");
  TITAN_CHECK(cache_BCGK.defined() && cache_BCGK.ndim() == 4 && cache_BCGK.dtype() == DType::f32 &&
                  cache_BCGK.is_contiguous() && cache_BCGK.size(0) == x_BSGK.size(0) &&
                  cache_BCGK.size(2) == x_BSGK.size(2) && cache_BCGK.size(3) == x_BSGK.size(3) &&
                  cache_BCGK.device() == x_BSGK.device(),
              "[kv_cache] cache_BCGK: expected a contiguous f32 [", x_BSGK.size(0), ", C, ", x_BSGK.size(2), ", ",
              x_BSGK.size(3), "] on ", device_name(x_BSGK.device()), " (the new tokens' B, G, K), got ",
              found(cache_BCGK), ". HINT: make the cache with the model's kv heads and head dim");
  TITAN_CHECK(start >= 0 && start + x_BSGK.size(1) <= cache_BCGK.size(1), "[kv_cache] slots [", start, ", ",
              start + x_BSGK.size(1), "): expected them inside the cache's ", cache_BCGK.size(1),
              " slots. HINT: size the cache for prompt + new tokens");
}

// Defined with the other registrations in ops/builtin.cpp (the explicit list).
void register_builtin_kv_cache_append(OpTable<KvCacheAppendImpl>& table);

OpTable<KvCacheAppendImpl>& kv_cache_append_table() {
  return builtin_table<KvCacheAppendImpl>("kv_cache_append", register_builtin_kv_cache_append);
}

void kv_cache_append(const Tensor& x_BSGK, int64_t start, Tensor& cache_BCGK) {
  OpTimer timer("kv_cache_append_forward");
  check_kv_cache_append(x_BSGK, start, cache_BCGK);
  kv_cache_append_table().select(x_BSGK.device(), x_BSGK, cache_BCGK).forward(x_BSGK, start, cache_BCGK);
}

}  // namespace titan::ops
