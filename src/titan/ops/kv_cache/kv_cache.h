// Appending new keys or values to a KV cache (generation): each batch row's S new tokens go to
// slots [start, start + S) of that row of the cache; the slots before and after are untouched.
// Shapes: B batch, S new tokens, C cache capacity (start + S <= C), G kv heads, K head dim.
//   x_BSGK       f32, contiguous: the new tokens' keys (after k-norm and RoPE) or values
//   cache_BCGK   f32, contiguous: written (=) at [b, start + s] = x_BSGK[b, s]
// A copy: every implementation gives the same bits. Nothing trains through a cache, so the op
// has a forward only (the Impl's backward slot is std::nullptr_t); kv_attention reads the cache.
#pragma once

#include <cstddef>
#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Throws naming the tensor, what it expected and what it found.
void check_kv_cache_append(const Tensor& x_BSGK, int64_t start, const Tensor& cache_BCGK);

void kv_cache_append(const Tensor& x_BSGK, int64_t start, Tensor& cache_BCGK);

using KvCacheAppendImpl = OpImpl<bool (*)(const Tensor& x_BSGK, const Tensor& cache_BCGK),
                                 void (*)(const Tensor& x_BSGK, int64_t start, Tensor& cache_BCGK), std::nullptr_t>;
OpTable<KvCacheAppendImpl>& kv_cache_append_table();
KvCacheAppendImpl kv_cache_append_impl_ref();
KvCacheAppendImpl kv_cache_append_impl_cpu();

}  // namespace titan::ops
