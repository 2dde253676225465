// The bf16 compute path's ops: the cast (bit-exact against core/dtype.h's scalar rounding), and
// linear, lm_head_xent and embedding on bf16 operands, each kernel against its reference. Both sides
// take the same bf16 values; the products of bf16 values are exact in f32, so kernel and reference
// differ only by f32 summation order (kF32Tol), as in the f32 sweeps. The emulated GEMM (widen to
// f32) is checked against oneDNN's bf16 matmul the same way.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "ops/op_harness.h"
#include "titan/core/dtype.h"
#include "titan/kernels/cpu/cast.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/embedding/embedding.h"
#include "titan/ops/matmul/linear.h"
#include "titan/ops/softmax_xent/softmax_xent.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

Tensor bf16_of(const Tensor& f32) { return f32.to(DType::bf16); }

// Round-to-nearest-even, ties, subnormals, infinities and NaNs: every kernel's cast equals the
// scalar rule, bit for bit, including the vector body and the tail, at each ISA level this CPU runs
// (the x86-64-v4 and the AVX2 code of kernels/cpu/cast.cpp).
TEST(Bf16, CastIsTheScalarRoundingBitForBit) {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.5f, 3.14159265f, 1e-40f, -1e-42f, 65504.0f, 3.0e38f,
                               std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::max()};
  // Exact ties between two bf16 values (low 16 bits 0x8000), even and odd upper halves.
  for (uint32_t upper : {0x3f80u, 0x3f81u, 0xbf82u, 0x7f7fu}) {
    const uint32_t bits = (upper << 16) | 0x8000u;
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
  }
  const uint32_t signalling = 0x7f800001u;  // a NaN whose payload would round to infinity if not kept quiet
  float snan;
  std::memcpy(&snan, &signalling, 4);
  values.push_back(snan);
  const Tensor random = random_f32({1000}, 7, 100.0f);
  for (int64_t i = 0; i < random.numel(); ++i) values.push_back(random.data<float>()[i]);
  const int64_t n = static_cast<int64_t>(values.size());
  Tensor src = Tensor::empty({n});
  std::copy(values.begin(), values.end(), src.data<float>());
  for (const bool baseline : {false, true}) {
    if (baseline && !kernels::simd_v4_supported()) continue;  // the first pass ran the AVX2 code already
    std::optional<kernels::SimdBaselineScope> avx2;
    if (baseline) avx2.emplace();
    for (const CastImpl& impl : cast_table().impls()) {
      Tensor dst = Tensor::empty({n}, DType::bf16);
      impl.forward(src, dst);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(dst.data<uint16_t>()[i], f32_to_bf16(values[static_cast<size_t>(i)]))
            << impl.name << " at " << i << (baseline ? " (AVX2)" : "");
      }
      Tensor back = Tensor::empty({n});
      impl.forward(dst, back);
      for (int64_t i = 0; i < n; ++i) {
        const float want = bf16_to_f32(dst.data<uint16_t>()[i]);
        ASSERT_EQ(std::memcmp(&back.data<float>()[i], &want, 4), 0)
            << impl.name << " widening at " << i << (baseline ? " (AVX2)" : "");
      }
    }
  }
  EXPECT_NE(error_of([&] {
              Tensor wrong = Tensor::empty({n});
              cast(src, wrong);
            }).find("one f32 and the other bf16"),
            std::string::npos);
}

TEST(Bf16, LinearKernelsMatchTheReference) {
  struct Case {
    int64_t n, in, out;
    bool bias;
  };
  // n <= 4: the decode GEMV (kernels/cpu/gemv_bf16.h) where the CPU has AVX-512-BF16; K off the
  // 32-pair vector, N off its 4-row block. 257 x 520 x 390: products of >= 64 MFLOP, titan's own
  // bf16 GEMM on AVX-512-BF16 CPUs without AMX (gemm.h), off its 12 x 32 register tile.
  for (const Case& c : {Case{1, 1, 1, false}, Case{5, 33, 17, true}, Case{64, 128, 96, false}, Case{33, 129, 257, true},
                        Case{1, 1024, 67, true}, Case{3, 70, 5, false}, Case{4, 31, 9, true}, Case{2, 2048, 1030, false},
                        Case{257, 520, 390, true}}) {
    const Tensor x = bf16_of(random_f32({c.n, c.in}, 1)), w = bf16_of(random_f32({c.out, c.in}, 2, 0.5f));
    const Tensor b = c.bias ? random_f32({c.out}, 3) : Tensor(), dy = random_f32({c.n, c.out}, 4);
    Outputs want;
    for (const LinearImpl& impl : linear_table().impls()) {
      Tensor y = Tensor::empty({c.n, c.out}), dx = garbage({c.n, c.in}), dw = random_f32({c.out, c.in}, 5);
      Tensor db = c.bias ? random_f32({c.out}, 6) : Tensor();
      impl.forward(x, w, b, y);
      impl.backward(dy, x, w, dx, dw, db);
      Outputs got = {{"y", y}, {"dx", dx}, {"dweight", dw}};
      if (c.bias) got.push_back({"dbias", db});
      if (want.empty()) {
        want = got;  // the reference is registered first
      } else {
        expect_outputs_match(str(impl.name, " n=", c.n, " in=", c.in, " out=", c.out), got, want);
      }
    }
  }
}

// An f32 weight beside a bf16 x (the master under bf16 compute) is rounded as the products read
// it: every kernel gives, bit for bit, what it gives on the weight rounded first: decode's GEMV rows,
// products under and over the 64 MFLOP from which titan's bf16 GEMM rounds while packing.
TEST(Bf16, LinearOnAnF32WeightEqualsItOnTheRoundedWeight) {
  for (const auto& [n, in, out] : {std::tuple<int64_t, int64_t, int64_t>{3, 70, 5}, {33, 129, 257}, {257, 520, 390}}) {
    const Tensor x = bf16_of(random_f32({n, in}, 1)), w32 = random_f32({out, in}, 2, 0.5f), w = bf16_of(w32);
    const Tensor b = random_f32({out}, 3), dy = random_f32({n, out}, 4);
    for (const LinearImpl& impl : linear_table().impls()) {
      Tensor y = Tensor::empty({n, out}), dx = garbage({n, in}), dw = random_f32({out, in}, 5), db = random_f32({out}, 6);
      Tensor y32 = Tensor::empty({n, out}), dx32 = garbage({n, in}), dw32 = dw.clone(), db32 = db.clone();
      impl.forward(x, w, b, y);
      impl.backward(dy, x, w, dx, dw, db);
      impl.forward(x, w32, b, y32);
      impl.backward(dy, x, w32, dx32, dw32, db32);
      const std::string at = str(impl.name, " n=", n, " in=", in, " out=", out);
      EXPECT_TRUE(all_close(at + " y", y32, y, kExact));
      EXPECT_TRUE(all_close(at + " dx", dx32, dx, kExact));
      EXPECT_TRUE(all_close(at + " dweight", dw32, dw, kExact));
      EXPECT_TRUE(all_close(at + " dbias", db32, db, kExact));
    }
  }
  Tensor y = Tensor::empty({3, 5});
  linear_forward(bf16_of(random_f32({3, 70}, 1)), random_f32({5, 70}, 2), Tensor(), y);  // the op accepts it
}

// dy is rounded to bf16 before the products: a dy that bf16 cannot hold gives the rounded
// result, not the f32 one (what autocast's bf16 output gradient does).
TEST(Bf16, LinearBackwardRoundsTheOutputGradient) {
  const Tensor x = bf16_of(random_f32({4, 8}, 1)), w = bf16_of(random_f32({3, 8}, 2));
  Tensor dy = random_f32({4, 3}, 3);
  const Tensor dy_rounded = dy.to(DType::bf16).to(DType::f32);
  Tensor dx1 = Tensor::empty({4, 8}), dw1 = Tensor::zeros({3, 8}), dx2 = Tensor::empty({4, 8}), dw2 = Tensor::zeros({3, 8});
  Tensor no_bias;
  linear_backward(dy, x, w, dx1, dw1, no_bias);
  linear_backward(dy_rounded, x, w, dx2, dw2, no_bias);
  EXPECT_TRUE(all_close("dx", dx1, dx2, kExact));
  EXPECT_TRUE(all_close("dweight", dw1, dw2, kExact));
  EXPECT_NE(error_of([&] {
              Tensor y = Tensor::empty({4, 3});
              linear_forward(x.to(DType::f32), w, Tensor(), y);
            }).find("x must have the weight's dtype"),
            std::string::npos);
}

// The second shape's weight (4.2M elements) is packed once for the chunks' logits products where
// the GEMM gains from it (AMX: gemm_bf16_pack_b), over chunks of 10 tokens and a short last one.
TEST(Bf16, LmHeadXentKernelsMatchTheReference) {
  for (const auto& [n, d, v, chunk] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{37, 48, 301, 8}, {24, 256, 16411, 10}}) {
    const Tensor x = bf16_of(random_f32({n, d}, 1)), w = bf16_of(random_f32({v, d}, 2, 0.3f));
    Tensor targets = Tensor::empty({n}, DType::i64);
    for (int64_t i = 0; i < n; ++i) targets.data<int64_t>()[i] = i % 5 == 0 ? -100 : (i * 37) % v;
    Outputs want;
    for (const LmHeadXentImpl& impl : lm_head_xent_table().impls()) {
      Tensor dx = garbage({n, d}), dw = random_f32({v, d}, 3);
      const LmHeadXentResult r = impl.backward({-100, chunk}, x, w, targets, 0.05f, dx, dw);
      const LmHeadXentResult fwd = impl.forward({-100, chunk}, x, w, targets);
      Outputs got = {{"loss", r.loss_sum, {1e-4, 1e-5}}, {"loss (forward)", fwd.loss_sum, {1e-4, 1e-5}},
                     {"dx", dx}, {"dweight", dw}};
      if (want.empty()) {
        want = got;
      } else {
        expect_outputs_match(str(impl.name, " v=", v), got, want);
      }
    }
  }
}

// An f32 weight beside a bf16 x is rounded as the products read it: every kernel gives, bit for
// bit, what it gives on the weight rounded first (a shape under and one over the 64 MFLOP from which
// the bf16 GEMM can round while packing, one whose weight is packed for AMX, several chunks each).
TEST(Bf16, LmHeadXentOnAnF32WeightEqualsItOnTheRoundedWeight) {
  for (const auto& [n, d, v] : {std::tuple<int64_t, int64_t, int64_t>{37, 48, 301}, {70, 256, 4099}, {40, 256, 16411}}) {
    const Tensor x = bf16_of(random_f32({n, d}, 1)), w32 = random_f32({v, d}, 2, 0.3f), w = bf16_of(w32);
    Tensor targets = Tensor::empty({n}, DType::i64);
    for (int64_t i = 0; i < n; ++i) targets.data<int64_t>()[i] = i % 5 == 0 ? -100 : (i * 37) % v;
    for (const LmHeadXentImpl& impl : lm_head_xent_table().impls()) {
      Tensor dx = garbage({n, d}), dw = random_f32({v, d}, 3), dx32 = garbage({n, d}), dw32 = dw.clone();
      const LmHeadXentResult r = impl.backward({-100, 32}, x, w, targets, 0.05f, dx, dw);
      const LmHeadXentResult r32 = impl.backward({-100, 32}, x, w32, targets, 0.05f, dx32, dw32);
      EXPECT_EQ(r32.loss_sum, r.loss_sum) << impl.name << " v=" << v;
      EXPECT_EQ(impl.forward({-100, 32}, x, w32, targets).loss_sum, r.loss_sum) << impl.name << " v=" << v;
      EXPECT_TRUE(all_close(impl.name + " dx", dx32, dx, kExact));
      EXPECT_TRUE(all_close(impl.name + " dweight", dw32, dw, kExact));
    }
  }
}

// Where the CPU kernel keeps every chunk's bf16 dlogits (on AMX: dx and dw then run as one
// product each after the last chunk), the results are the per-chunk products' (all_dlogits_bytes
// 0): the loss and dx bit for bit (each dx row sums over V in the same order either way), dw up to
// f32 summation order (one sum over the tokens instead of one per chunk). The second chunk's
// targets are all ignored: its dlogits rows are zeros, its dx rows zero.
TEST(Bf16, LmHeadXentKeepingAllDlogitsEqualsThePerChunkProducts) {
  const int64_t n = 100, d = 64, v = 4099;
  if (!lm_head_xent_keeps_all_dlogits({}, n, v, DType::bf16)) GTEST_SKIP() << "per-chunk products on this CPU";
  const Tensor x = bf16_of(random_f32({n, d}, 1)), w = bf16_of(random_f32({v, d}, 2, 0.3f));
  Tensor targets = Tensor::empty({n}, DType::i64);
  for (int64_t i = 0; i < n; ++i) targets.data<int64_t>()[i] = i >= 32 && i < 64 ? -100 : (i * 37) % v;
  const LmHeadXentImpl& cpu = lm_head_xent_table().impls().back();  // the CPU kernel
  Tensor dx = garbage({n, d}), dw = random_f32({v, d}, 3), dx1 = garbage({n, d}), dw1 = dw.clone();
  const LmHeadXentResult r = cpu.backward({-100, 32}, x, w, targets, 0.05f, dx, dw);
  const LmHeadXentResult r1 = cpu.backward({-100, 32, 0}, x, w, targets, 0.05f, dx1, dw1);
  EXPECT_EQ(r.loss_sum, r1.loss_sum);
  EXPECT_TRUE(all_close("dx", dx1, dx, kExact));
  EXPECT_TRUE(all_close("dweight", dw1, dw, kF32Tol));
  for (int64_t i = 32 * d; i < 64 * d; ++i) ASSERT_EQ(dx.data<float>()[i], 0.0f) << i;
}

TEST(Bf16, EmbeddingLooksUpWidenedRows) {
  const Tensor table = bf16_of(random_f32({50, 24}, 1));
  Tensor ids = Tensor::empty({9}, DType::i64);
  for (int64_t i = 0; i < 9; ++i) ids.data<int64_t>()[i] = (i * 13) % 50;
  const Tensor table32 = table.to(DType::f32);
  for (const EmbeddingImpl& impl : embedding_table().impls()) {
    Tensor y = Tensor::empty({9, 24}), want = Tensor::empty({9, 24});
    impl.forward(ids, table, y);
    impl.forward(ids, table32, want);
    EXPECT_TRUE(all_close(impl.name, y, want, kExact));
  }
}

// gemm_bf16 (oneDNN's bf16 matmul, titan's AVX-512-BF16 kernel, or where emulated titan's AVX2 kernel)
// against the f32 GEMM on the widened operands, in every transpose form and with alpha / beta: the
// same exact products, summed in two orders.
TEST(Bf16, EmulatedGemmMatchesTheBf16Matmul) {
  const int64_t m = 19, n = 23, k = 41;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const Tensor a = bf16_of(random_f32(ta ? Shape{k, m} : Shape{m, k}, 1));
      const Tensor b = bf16_of(random_f32(tb ? Shape{n, k} : Shape{k, n}, 2));
      const Tensor a32 = a.to(DType::f32), b32 = b.to(DType::f32);
      Tensor c = random_f32({m, n}, 3), c32 = c.clone();
      kernels::gemm_bf16(ta, tb, m, n, k, 0.5f, a.data<uint16_t>(), ta ? m : k, b.data<uint16_t>(), tb ? k : n, 1.0f,
                         c.data<float>(), n);
      kernels::gemm(ta, tb, m, n, k, 0.5f, a32.data<float>(), ta ? m : k, b32.data<float>(), tb ? k : n, 1.0f,
                    c32.data<float>(), n);
      EXPECT_TRUE(all_close(str("gemm_bf16 ta=", ta, " tb=", tb), c, c32, kF32Tol));
    }
  }
}

}  // namespace
}  // namespace titan::ops
