// Attention over a KV cache (ops/kv_attention): every registered kernel against the reference on
// decode and prefill shapes, GQA ratios, left padding and a partly filled cache; and the reference
// against the training attention's reference (a whole causal sequence in one go is the same math).
#include "titan/ops/kv_attention/kv_attention.h"

#include <cmath>

#include "ops/op_harness.h"
#include "titan/ops/attention/attention.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t b, s, c, end, h, g, k;
  std::vector<int64_t> begin;
};
// S = 1 (decode) and S > 1 (prefill), end < C (a partly filled cache), odd K, left padding that
// leaves some prompt queries with nothing to attend (zeros).
const Case kCases[] = {{1, 1, 8, 1, 1, 1, 16, {0}},           {1, 1, 40, 33, 4, 2, 64, {0}},
                       {2, 5, 16, 5, 4, 4, 16, {0, 3}},       {3, 1, 130, 97, 8, 2, 128, {0, 10, 96}},
                       {2, 7, 20, 12, 6, 2, 24, {4, 9}},      {1, 3, 9, 9, 2, 1, 33, {0}},
                       {2, 9, 9, 9, 16, 8, 128, {0, 5}}};

Tensor begin_tensor(const Case& c) {
  Tensor t = Tensor::empty({c.b}, DType::i64);
  for (int64_t i = 0; i < c.b; ++i) t.data<int64_t>()[i] = c.begin[static_cast<size_t>(i)];
  return t;
}

TEST(KvAttention, EveryKernelMatchesTheReference) {
  for (const Case& c : kCases) {
    const Tensor q = random_f32({c.b, c.s, c.h, c.k}, 21), k = random_f32({c.b, c.c, c.g, c.k}, 22),
                 v = random_f32({c.b, c.c, c.g, c.k}, 23), begin = begin_tensor(c);
    const auto& table = kv_attention_table();
    Tensor want = Tensor::empty(q.shape());
    table.ref().forward({}, q, k, v, begin, c.end, want);
    for (const auto& impl : table.impls()) {
      Tensor got = Tensor::empty(q.shape());
      impl.forward({}, q, k, v, begin, c.end, got);
      EXPECT_TRUE(all_close(str(impl.name, " B=", c.b, " S=", c.s, " end=", c.end, " H=", c.h, " G=", c.g, " K=", c.k),
                            got, want, kF32Tol));
    }
  }
}

// With the whole sequence in the cache (S = end = T, no padding), the result is causal attention.
TEST(KvAttention, WholeSequenceEqualsCausalAttention) {
  const int64_t B = 2, T = 11, H = 4, G = 2, K = 32;
  const Tensor q = random_f32({B, T, H, K}, 31), k = random_f32({B, T, G, K}, 32), v = random_f32({B, T, G, K}, 33);
  Tensor want = Tensor::empty(q.shape()), lse = Tensor::empty({B, H, T});
  ref::attention_forward<float>({B, T, T, H, G, K, K}, 1.0 / std::sqrt(static_cast<double>(K)), {}, q.data<float>(),
                                k.data<float>(), v.data<float>(), want.data<float>(), lse.data<float>());
  Tensor begin = Tensor::zeros({B}, DType::i64), got = Tensor::empty(q.shape());
  kv_attention_table().ref().forward({}, q, k, v, begin, T, got);
  EXPECT_TRUE(all_close("kv_attention_ref vs attention_ref", got, want, kF32Tol));
}

// A padding slot's key is never read: changing it changes nothing; a query before its row's first
// slot gets zeros.
TEST(KvAttention, LeftPaddingIsMaskedOut) {
  const Case c{1, 5, 6, 6, 2, 1, 16, {2}};  // query slots 1..5, row starts at slot 2
  const Tensor q = random_f32({1, 5, 2, 16}, 41), v = random_f32({1, 6, 1, 16}, 43), begin = begin_tensor(c);
  Tensor k = random_f32({1, 6, 1, 16}, 42), a = Tensor::empty(q.shape()), b = Tensor::empty(q.shape());
  kv_attention_forward({}, q, k, v, begin, 6, a);
  for (int64_t i = 0; i < 2 * 16; ++i) k.data<float>()[i] = 1e3f;  // slots 0 and 1 are padding
  kv_attention_forward({}, q, k, v, begin, 6, b);
  EXPECT_TRUE(all_close("padding", a, b, kExact));
  for (int64_t i = 0; i < 2 * 16; ++i) EXPECT_EQ(a.data<float>()[i], 0.0f);  // the query in slot 1, both heads
}

TEST(KvAttention, BadShapesAreOneLineErrors) {
  const Tensor q = random_f32({1, 2, 4, 16}, 1), k = random_f32({1, 8, 2, 16}, 2);
  Tensor out = Tensor::empty(q.shape());
  const Tensor begin = Tensor::zeros({1}, DType::i64);
  EXPECT_NE(error_of([&] { kv_attention_forward({}, q, k, k, begin, 9, out); }).find("end = 9"), std::string::npos);
  EXPECT_NE(error_of([&] { kv_attention_forward({}, q, random_f32({1, 8, 3, 16}, 3), random_f32({1, 8, 3, 16}, 3),
                                                begin, 4, out); }).find("kv heads"), std::string::npos);
  EXPECT_NE(error_of([&] { kv_attention_forward({}, q, k, k, Tensor::zeros({2}, DType::i64), 4, out); }).find("begin"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
