#include "titan/kernels/cpu/gemm.h"

#include <gtest/gtest.h>

#include "ops/op_harness.h"

namespace titan::kernels {
namespace {

using namespace titan::testing;

TEST(Gemm, AllTransposeFormsMatchReference) {
  struct Case { int64_t m, n, k; };
  const Case cases[] = {{1, 1, 1}, {3, 5, 7}, {17, 33, 65}, {64, 48, 128}, {129, 7, 31}};
  for (const Case& c : cases) {
    for (int form = 0; form < 4; ++form) {
      const bool ta = form & 1, tb = form & 2;
      const Tensor a = random_f32(ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, 1);
      const Tensor b = random_f32(tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, 2);
      Tensor c_ref = random_f32({c.m, c.n}, 3), c_out = c_ref.clone();
      const int64_t lda = a.size(1), ldb = b.size(1);
      gemm_ref(ta, tb, c.m, c.n, c.k, 0.5f, a.data<float>(), lda, b.data<float>(), ldb, 1.0f,
               c_ref.data<float>(), c.n);
      gemm(ta, tb, c.m, c.n, c.k, 0.5f, a.data<float>(), lda, b.data<float>(), ldb, 1.0f,
           c_out.data<float>(), c.n);
      EXPECT_TRUE(all_close(str("gemm ta=", ta, " tb=", tb, " m=", c.m, " n=", c.n, " k=", c.k),
                            c_out, c_ref, {1e-4, 1e-4}));
    }
  }
}

TEST(Gemm, ReferenceComputesAKnownProduct) {
  // [[1,2],[3,4]] x [[5,6],[7,8]] = [[19,22],[43,50]].
  const float a[] = {1, 2, 3, 4}, b[] = {5, 6, 7, 8};
  float c[4] = {};
  gemm_ref(false, false, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  EXPECT_EQ(c[0], 19);
  EXPECT_EQ(c[1], 22);
  EXPECT_EQ(c[2], 43);
  EXPECT_EQ(c[3], 50);
}

}  // namespace
}  // namespace titan::kernels
