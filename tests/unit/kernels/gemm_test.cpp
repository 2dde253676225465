#include "titan/kernels/cpu/gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "titan/core/dtype.h"
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm_bf16_avx2.h"
#include "titan/kernels/cpu/gemm_bf16_amx.h"
#include "titan/kernels/cpu/gemm_bf16_avx512.h"

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

// bf16 operands with strides: every element is exactly representable, so the f64 reference over
// the widened values is the exact product; the kernel's f32 accumulation is within f32 noise.
struct Bf16Case {
  int64_t m, n, k;
};
struct Bf16Operands {
  std::vector<uint16_t> a, b;
  std::vector<float> a32, b32;
  int64_t lda, ldb;
};
Bf16Operands bf16_operands(bool ta, bool tb, const Bf16Case& c, uint64_t seed) {
  Bf16Operands o;
  o.lda = (ta ? c.m : c.k) + 3;  // padded rows: the kernel must honour the stride
  o.ldb = (tb ? c.k : c.n) + 5;
  const Tensor ra = random_f32({(ta ? c.k : c.m) * o.lda}, seed), rb = random_f32({(tb ? c.n : c.k) * o.ldb}, seed + 1);
  for (const auto& [src, bits, wide] : {std::tuple{&ra, &o.a, &o.a32}, std::tuple{&rb, &o.b, &o.b32}}) {
    for (int64_t i = 0; i < src->numel(); ++i) {
      bits->push_back(f32_to_bf16(src->data<float>()[i]));
      wide->push_back(bf16_to_f32(bits->back()));
    }
  }
  return o;
}

// titan's three bf16 kernels behind gemm_bf16, each with the number of rounded adds its order makes
// per C element (the bound below): AVX-512-BF16 adds pairs of products, AVX2 FMA one product at a
// time, AMX at most one per product (the instruction leaves its internal order open). round_b:
// the kernel's f32-B form, where it has one.
struct Bf16Kernel {
  const char* name;
  bool supported;
  void (*bf16)(bool, bool, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t, const uint16_t*, int64_t, float,
               float*, int64_t);
  void (*round_b)(bool, bool, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t, const float*, int64_t, float,
                  float*, int64_t);
  double adds_per_k;
};
std::vector<Bf16Kernel> bf16_kernels() {
  return {{"amx", gemm_bf16_amx_supported(), gemm_bf16_amx, gemm_bf16_amx, 1.0},
          {"avx512", gemm_bf16_avx512_supported(), gemm_bf16_avx512, gemm_bf16_avx512, 0.5},
          {"avx2", true, gemm_bf16_avx2, gemm_bf16_avx2, 1.0}};  // AVX2 + FMA: titan's baseline ISA
}

TEST(GemmBf16Kernels, AllFormsEdgesOddKAndStridesMatchTheExactProduct) {
  // Edges of the register tiles (32 x 32, 12 x 32, 6 x 16), of the row blocks (256, or one of up
  // to 512 / 48 / 144 rows), the column panels (1024 / 4080) and the k blocks (2048 / 4096 / 256;
  // AMX's tile steps of 32); odd k (a zero-padded pair); k = 1.
  const Bf16Case cases[] = {{1, 1, 1},       {3, 5, 7},      {12, 32, 2},   {13, 33, 3},    {7, 17, 9},
                            {29, 70, 257},   {193, 40, 513}, {20, 4100, 9}, {64, 64, 128},  {200, 31, 600},
                            {145, 4097, 17}, {6, 16, 4097},  {530, 33, 33}, {33, 1025, 65}};
  for (const Bf16Kernel& kernel : bf16_kernels()) {
    if (!kernel.supported) continue;
    for (const Bf16Case& c : cases) {
      for (int form = 0; form < 4; ++form) {
        const bool ta = form & 1, tb = form & 2;
        const Bf16Operands o = bf16_operands(ta, tb, c, 11);
        // alpha 1 with beta 0: C's whole blocks stored from the AMX tiles where rows are close.
        for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, {0.75f, 0.0f}, {0.75f, 1.0f}, {0.75f, -0.5f}}) {
          const Tensor init = random_f32({c.m, c.n + 2}, 3);
          std::vector<float> out(init.data<float>(), init.data<float>() + init.numel()), ref = out;
          if (beta == 0.0f) std::fill(out.begin(), out.end(), std::nanf(""));  // beta = 0 must not read C
          gemm_ref(ta, tb, c.m, c.n, c.k, alpha, o.a32.data(), o.lda, o.b32.data(), o.ldb, beta, ref.data(), c.n + 2);
          kernel.bf16(ta, tb, c.m, c.n, c.k, alpha, o.a.data(), o.lda, o.b.data(), o.ldb, beta, out.data(), c.n + 2);
          // The bound of f32 accumulation: each of the ~k * adds_per_k + 2 rounded adds errs by at most
          // one half-ulp of a partial sum, itself at most sum |alpha a b| + |beta c|.
          std::vector<float> abs_sum(init.numel(), 0.0f);
          std::vector<float> a_abs(o.a32), b_abs(o.b32);
          for (float& x : a_abs) x = std::abs(x);
          for (float& x : b_abs) x = std::abs(x);
          gemm_ref(ta, tb, c.m, c.n, c.k, alpha, a_abs.data(), o.lda, b_abs.data(), o.ldb, 0.0f, abs_sum.data(),
                   c.n + 2);
          const std::string what =
              str(kernel.name, " ta=", ta, " tb=", tb, " m=", c.m, " n=", c.n, " k=", c.k, " alpha=", alpha, " beta=", beta);
          for (int64_t i = 0; i < c.m; ++i) {
            for (int64_t j = 0; j < c.n + 2; ++j) {
              const int64_t at = i * (c.n + 2) + j;
              if (j >= c.n) {  // the columns past n stay as they were
                ASSERT_TRUE(beta == 0.0f ? std::isnan(out[at]) : ref[at] == out[at]) << what;
                continue;
              }
              const double scale = abs_sum[at] + std::abs(beta * init.data<float>()[at]);
              const double bound = (static_cast<double>(c.k) * kernel.adds_per_k + 2) * 0x1p-24 * scale + 1e-30;
              ASSERT_LE(std::abs(static_cast<double>(out[at]) - ref[at]), bound) << what << " at " << i << "," << j;
            }
          }
        }
      }
    }
  }
}

TEST(GemmBf16Kernels, ResultsAreBitwiseTheSameOnAnyThreadCount) {
  const Bf16Case c{400, 300, 700};
  const Bf16Operands o = bf16_operands(false, true, c, 21);
  for (const Bf16Kernel& kernel : bf16_kernels()) {
    if (!kernel.supported) continue;
    std::vector<float> one(c.m * c.n), two(c.m * c.n);
    const int before = num_threads();
    set_num_threads(1);
    kernel.bf16(false, true, c.m, c.n, c.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f, one.data(), c.n);
    set_num_threads(std::max(2, before));
    kernel.bf16(false, true, c.m, c.n, c.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, 0.0f, two.data(), c.n);
    set_num_threads(before);
    EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0) << kernel.name;
  }
}

// gemm_bf16 itself (whichever kernel it runs here) with a reduction of 36,867: every form, beta = 0
// (C not read), 1 and -0.5; within the f32 accumulation bound of the exact product (one rounded
// add per k, a few per k block).
TEST(GemmBf16, LongReductionsMatchTheExactProduct) {
  const Bf16Case c{5, 9, 2 * 16384 + 4099};
  for (int form = 0; form < 4; ++form) {
    const bool ta = form & 1, tb = form & 2;
    const Bf16Operands o = bf16_operands(ta, tb, c, 51);
    std::vector<float> a_abs(o.a32), b_abs(o.b32), abs_sum(static_cast<size_t>(c.m * c.n));
    for (float& x : a_abs) x = std::abs(x);
    for (float& x : b_abs) x = std::abs(x);
    gemm_ref(ta, tb, c.m, c.n, c.k, 1.0f, a_abs.data(), o.lda, b_abs.data(), o.ldb, 0.0f, abs_sum.data(), c.n);
    for (const float beta : {0.0f, 1.0f, -0.5f}) {
      const Tensor init = random_f32({c.m, c.n}, 7);
      std::vector<float> out(init.data<float>(), init.data<float>() + init.numel()), ref = out;
      if (beta == 0.0f) std::fill(out.begin(), out.end(), std::nanf(""));
      gemm_ref(ta, tb, c.m, c.n, c.k, 1.0f, o.a32.data(), o.lda, o.b32.data(), o.ldb, beta, ref.data(), c.n);
      gemm_bf16(ta, tb, c.m, c.n, c.k, 1.0f, o.a.data(), o.lda, o.b.data(), o.ldb, beta, out.data(), c.n);
      for (int64_t i = 0; i < c.m * c.n; ++i) {
        const double scale = abs_sum[i] + std::abs(beta * init.data<float>()[i]);
        const double bound = (static_cast<double>(c.k) + 8) * 0x1p-24 * scale + 1e-30;
        ASSERT_LE(std::abs(static_cast<double>(out[i]) - ref[i]), bound)
            << "ta=" << ta << " tb=" << tb << " beta=" << beta << " at " << i;
      }
    }
  }
}

// B in f32, rounded while packed: bit for bit the product of B rounded first, in every form, at the
// register tile's and the k block's edges, on titan's kernels directly and through gemm_bf16_round_b
// (which takes titan's AMX kernel where the CPU has AMX, its AVX-512-BF16 kernel from 64 MFLOP where
// it can and rounds a copy below, or titan's AVX2 kernel where gemm_bf16 has no oneDNN bf16
// kernel). B holds values that round up, ties to even, infinities and a NaN besides the random ones.
TEST(GemmBf16, RoundingBWhilePackingEqualsRoundingItFirst) {
  const Bf16Case cases[] = {{3, 5, 7}, {13, 33, 3}, {29, 70, 257}, {64, 1061, 1001}, {20, 40, 4099}};
  const float specials[] = {1.00390625f, 1.01171875f, -1.0078125f, 3.0e38f, -std::numeric_limits<float>::infinity(),
                            std::nanf(""), 1e-40f, 0.0f};
  for (const Bf16Case& c : cases) {
    for (int form = 0; form < 4; ++form) {
      const bool ta = form & 1, tb = form & 2;
      const Bf16Operands o = bf16_operands(ta, tb, c, 31);
      std::vector<float> b32(o.b32.size());
      const Tensor rb = random_f32({static_cast<int64_t>(b32.size())}, 41);
      for (size_t i = 0; i < b32.size(); ++i) b32[i] = i % 97 < 8 ? specials[i % 97] : rb.data<float>()[i];
      std::vector<uint16_t> rounded(b32.size());
      for (size_t i = 0; i < b32.size(); ++i) rounded[i] = f32_to_bf16(b32[i]);
      const std::string what = str("ta=", ta, " tb=", tb, " m=", c.m, " n=", c.n, " k=", c.k);
      const Tensor init = random_f32({c.m, c.n}, 5);
      std::vector<float> want(init.data<float>(), init.data<float>() + init.numel()), got = want, via = want;
      gemm_bf16(ta, tb, c.m, c.n, c.k, 0.5f, o.a.data(), o.lda, rounded.data(), o.ldb, 1.0f, want.data(), c.n);
      gemm_bf16_round_b(ta, tb, c.m, c.n, c.k, 0.5f, o.a.data(), o.lda, b32.data(), o.ldb, 1.0f, via.data(), c.n);
      EXPECT_EQ(std::memcmp(want.data(), via.data(), want.size() * sizeof(float)), 0) << "gemm_bf16_round_b " << what;
      for (const Bf16Kernel& kernel : bf16_kernels()) {
        if (!kernel.supported || kernel.round_b == nullptr) continue;
        std::vector<float> direct(init.data<float>(), init.data<float>() + init.numel());
        std::copy(init.data<float>(), init.data<float>() + init.numel(), want.begin());
        kernel.bf16(ta, tb, c.m, c.n, c.k, 0.5f, o.a.data(), o.lda, rounded.data(), o.ldb, 1.0f, want.data(), c.n);
        kernel.round_b(ta, tb, c.m, c.n, c.k, 0.5f, o.a.data(), o.lda, b32.data(), o.ldb, 1.0f, direct.data(), c.n);
        EXPECT_EQ(std::memcmp(want.data(), direct.data(), want.size() * sizeof(float)), 0) << kernel.name << " " << what;
      }
    }
  }
}

// The AMX kernel's packed B (the lm_head's weight, packed once for its chunks): bit for bit the
// product that packs B per call, for both storages of B, across k blocks (k 4100: three) and
// column panels (n 1100: two), beta 0 and 1. (A wrong k offset into the packed panels fails it.)
// An f32 B rounded as it is packed gives the bytes of B rounded first, then packed.
TEST(GemmBf16Amx, PackedBEqualsPackingPerCall) {
  if (!gemm_bf16_amx_supported()) GTEST_SKIP() << "no AMX here";
  const Bf16Case cases[] = {{37, 1100, 1025}, {5, 33, 31}, {300, 64, 512}, {40, 70, 4100}};
  for (const Bf16Case& c : cases) {
    for (const bool tb : {false, true}) {
      const Bf16Operands o = bf16_operands(false, tb, c, 61);
      std::vector<uint8_t> packed(static_cast<size_t>(gemm_bf16_amx_packed_b_bytes(c.k, c.n)));
      gemm_bf16_amx_pack_b(tb, c.k, c.n, o.b.data(), o.ldb, packed.data());
      {
        const Tensor b32 = random_f32({static_cast<int64_t>(o.b.size())}, 71);
        std::vector<uint16_t> rounded(o.b.size());
        for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = f32_to_bf16(b32.data<float>()[i]);
        std::vector<uint8_t> want(packed.size()), got(packed.size());
        gemm_bf16_amx_pack_b(tb, c.k, c.n, rounded.data(), o.ldb, want.data());
        gemm_bf16_amx_pack_b(tb, c.k, c.n, b32.data<float>(), o.ldb, got.data());
        EXPECT_EQ(want, got) << "f32 B, tb=" << tb << " n=" << c.n << " k=" << c.k;
      }
      for (const float beta : {0.0f, 1.0f}) {
        const Tensor init = random_f32({c.m, c.n}, 9);
        std::vector<float> want(init.data<float>(), init.data<float>() + init.numel()), got = want;
        gemm_bf16_amx(false, tb, c.m, c.n, c.k, 0.5f, o.a.data(), o.lda, o.b.data(), o.ldb, beta, want.data(), c.n);
        gemm_bf16_amx_packed(c.m, c.n, c.k, 0.5f, o.a.data(), o.lda, packed.data(), beta, got.data(), c.n);
        EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
            << "tb=" << tb << " m=" << c.m << " n=" << c.n << " k=" << c.k << " beta=" << beta;
      }
    }
  }
}

}  // namespace
}  // namespace titan::kernels
