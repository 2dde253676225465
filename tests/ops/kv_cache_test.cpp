// Appending to a KV cache: every implementation against the reference (a copy, so exactly), the
// slots written and untouched by value, and the one-line errors.
#include "titan/ops/kv_cache/kv_cache.h"

#include <string>
#include <vector>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct AppendCase {
  int64_t b, s, c, g, k, start;
};

OpTest<KvCacheAppendImpl, AppendCase> append_test() {
  return {
      .table = &kv_cache_append_table(),
      .cases = {{1, 1, 1, 1, 1, 0}, {2, 5, 9, 1, 3, 0}, {3, 1, 7, 2, 5, 6}, {3, 4, 11, 3, 7, 2},
                {5, 13, 40, 2, 33, 27}, {2, 300, 512, 4, 64, 100}, {2, 0, 4, 1, 2, 4}},
      .name = [](const AppendCase& c) { return str("B=", c.b, " S=", c.s, " C=", c.c, " G=", c.g, " K=", c.k,
                                                   " start=", c.start); },
      .forward = [](const KvCacheAppendImpl& impl, const AppendCase& c) -> Outputs {
        Tensor cache = random_f32({c.b, c.c, c.g, c.k}, 9);  // slots outside the block must survive
        impl.forward(random_f32({c.b, c.s, c.g, c.k}, 1), c.start, cache);
        return {{"cache", cache, kExact}};
      },
      .threads = {1, 3},
  };
}

TEST(KvCacheAppend, KernelsMatchReference) { sweep(append_test(), {Mode::forward}); }

// x[b, s, g, k] = 1000 b + 100 s + 10 g + k into a cache of -1: slot start + s of row b holds
// token s of row b, every other slot stays -1.
TEST(KvCacheAppend, WritesTheBlockAndNothingElse) {
  const int64_t B = 2, S = 2, C = 5, G = 2, K = 3, start = 2;
  Tensor x = Tensor::empty({B, S, G, K});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t k = 0; k < K; ++k)
          x.data<float>()[((b * S + s) * G + g) * K + k] = static_cast<float>(1000 * b + 100 * s + 10 * g + k);
  for (const KvCacheAppendImpl& impl : kv_cache_append_table().impls()) {
    Tensor cache = Tensor::empty({B, C, G, K});
    cache.fill_(-1.0f);
    impl.forward(x, start, cache);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t slot = 0; slot < C; ++slot)
        for (int64_t g = 0; g < G; ++g)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t s = slot - start;
            const float want = s >= 0 && s < S ? static_cast<float>(1000 * b + 100 * s + 10 * g + k) : -1.0f;
            ASSERT_EQ(cache.data<float>()[((b * C + slot) * G + g) * K + k], want)
                << impl.name << " b=" << b << " slot=" << slot << " g=" << g << " k=" << k;
          }
  }
  EXPECT_EQ(kv_cache_append_table().impls().back().name, "kv_cache_append_cpu");
}

TEST(KvCacheAppend, ErrorsNameTheTensor) {
  Tensor x = Tensor::zeros({2, 3, 1, 4}), cache = Tensor::zeros({2, 5, 1, 4});
  EXPECT_NE(error_of([&] { kv_cache_append(x, 3, cache); }).find("slots [3, 6)"), std::string::npos);
  Tensor wrong = Tensor::zeros({2, 5, 2, 4});
  EXPECT_NE(error_of([&] { kv_cache_append(x, 0, wrong); }).find("[kv_cache] cache_BCGK"), std::string::npos);
  EXPECT_NE(error_of([&] { kv_cache_append(Tensor::zeros({6, 4}), 0, cache); }).find("[kv_cache] x_BSGK"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
