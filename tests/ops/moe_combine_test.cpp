// MoE combine: the reference backward (weighted and unweighted) against finite differences,
// every kernel against the reference, forward and backward, and bad arguments.
#include "titan/ops/moe_combine/moe_combine.h"

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct CombineCase {
  int64_t n, d, top_k;
};

std::string name(const CombineCase& c) { return str("n=", c.n, " d=", c.d, " k=", c.top_k); }

// row_of_pair: the pairs in a fixed scrambled order (q * 7 + 3 mod P, P coprime with 7 here, else
// reversed), so that a token's rows are not adjacent.
Tensor make_row_of_pair(const CombineCase& c) {
  const int64_t p = c.n * c.top_k;
  Tensor t = Tensor::empty({c.n, c.top_k}, DType::i32);
  for (int64_t q = 0; q < p; ++q) {
    t.data<int32_t>()[q] = static_cast<int32_t>(p % 7 != 0 ? (q * 7 + 3) % p : p - 1 - q);
  }
  return t;
}

// ---- 1. reference backward vs central finite differences (fp64) ----

TEST(MoeCombine, ReferenceBackwardMatchesFiniteDifferences) {
  for (const CombineCase& c : {CombineCase{3, 4, 2}, CombineCase{4, 3, 3}}) {
    const int64_t p = c.n * c.top_k;
    const Tensor rop = make_row_of_pair(c);
    const int32_t* row_of_pair = rop.data<int32_t>();
    const auto y0 = random_doubles(p * c.d, 1), w0 = random_doubles(p, 2);
    const auto r = random_doubles(c.n * c.d, 3);
    for (bool weighted : {false, true}) {
      auto loss = [&](const std::vector<double>& y, const std::vector<double>& w) {  // sum(out r)
        std::vector<double> out(c.n * c.d);
        ref::moe_combine_forward(c.n, c.d, c.top_k, y.data(), weighted ? w.data() : nullptr,
                                 row_of_pair, out.data());
        return dot(out, r);
      };
      std::vector<double> dy(p * c.d, 7.0), dw(p, 7.0);
      ref::moe_combine_backward(c.n, c.d, c.top_k, r.data(), y0.data(),
                                weighted ? w0.data() : nullptr, row_of_pair, dy.data(), dw.data());
      const std::string where = "moe_combine_ref " + name(c) + (weighted ? " weighted" : "");
      EXPECT_TRUE(all_close(where + " dy", dy, numeric_gradient([&](const auto& v) {
        return loss(v, w0); }, y0), kFdTol));
      if (weighted) {
        EXPECT_TRUE(all_close(where + " dweight", dw, numeric_gradient([&](const auto& v) {
          return loss(y0, v); }, w0), kFdTol));
      }
    }
  }
}

// ---- 2. every kernel vs the reference, forward and backward ----

TEST(MoeCombine, KernelsMatchReference) {
  const CombineCase cases[] = {{1, 1, 1}, {7, 9, 2}, {9, 6, 3}, {33, 19, 8}, {300, 40, 4},
                               {0, 5, 2}};
  const MoeCombineImpl& ref = moe_combine_table().ref();
  for (const CombineCase& c : cases) {
    const int64_t p = c.n * c.top_k;
    const Tensor rop = make_row_of_pair(c), y = random_f32({p, c.d}, 11);
    const Tensor weight = random_f32({c.n, c.top_k}, 12), dout = random_f32({c.n, c.d}, 13);
    for (bool weighted : {false, true}) {
      const Tensor w = weighted ? weight : Tensor{}, yb = weighted ? y : Tensor{};
      Tensor out_ref = Tensor::empty({c.n, c.d}), dy_ref = random_f32({p, c.d}, 14, 100.0f);
      Tensor dw_ref = weighted ? random_f32({c.n, c.top_k}, 15, 100.0f) : Tensor{};
      ref.forward(y, w, rop, out_ref);
      ref.backward(dout, yb, w, rop, dy_ref, dw_ref);
      for (const MoeCombineImpl& impl : moe_combine_table().impls()) {
        const std::string where = impl.name + " " + name(c) + (weighted ? " weighted" : "");
        Tensor out = random_f32({c.n, c.d}, 16, 100.0f), dy = random_f32({p, c.d}, 14, 100.0f);
        Tensor dw = weighted ? random_f32({c.n, c.top_k}, 15, 100.0f) : Tensor{};
        impl.forward(y, w, rop, out);
        EXPECT_TRUE(all_close(where + " out", out, out_ref, kF32Tol));
        impl.backward(dout, yb, w, rop, dy, dw);
        EXPECT_TRUE(all_close(where + " dy", dy, dy_ref, kF32Tol));
        if (weighted) {
          EXPECT_TRUE(all_close(where + " dweight", dw, dw_ref, kF32Tol));
        }
      }
    }
  }
}

TEST(MoeCombine, RejectsBadArguments) {
  const CombineCase c{4, 6, 2};
  const Tensor rop = make_row_of_pair(c), y = random_f32({8, 6}, 21);
  Tensor out = Tensor::empty({4, 6}), dy = Tensor::empty({8, 6}), none;
  std::string msg = error_of([&] { moe_combine_forward(y, Tensor::zeros({4, 3}), rop, out); });
  EXPECT_NE(msg.find("[moe_combine] weight: expected contiguous f32[4, 2], got f32[4, 3]"),
            std::string::npos)
      << msg;
  msg = error_of([&] { moe_combine_backward(out, Tensor{}, Tensor::zeros({4, 2}), rop, dy, none); });
  EXPECT_NE(msg.find("[moe_combine] weight, y and dweight: expected all three"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

}  // namespace
}  // namespace titan::ops
