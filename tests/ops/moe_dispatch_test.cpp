// MoE dispatch: the reference backward against finite differences, the layout of a hand-sorted
// example, every kernel against the reference (forward and backward), and bad arguments.
#include "titan/ops/moe_dispatch/moe_dispatch.h"

#include <cstring>

#include "ops/op_harness.h"
#include "titan/core/rng.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct DispatchCase {
  int64_t n, d, e, top_k;
};

std::string name(const DispatchCase& c) {
  return str("n=", c.n, " d=", c.d, " e=", c.e, " k=", c.top_k);
}

// Distinct experts per token (as the router chooses them), drawn so that some experts stay empty
// when E is large.
Tensor random_experts(const DispatchCase& c, uint64_t seed) {
  Tensor t = Tensor::empty({c.n, c.top_k}, DType::i32);
  const Rng rng(seed);
  uint64_t draw = 0;
  for (int64_t n = 0; n < c.n; ++n) {
    for (int64_t k = 0; k < c.top_k; ++k) {
      int32_t j;
      bool fresh;
      do {
        j = static_cast<int32_t>(rng.bits(draw++) % static_cast<uint64_t>(c.e));
        fresh = true;
        for (int64_t i = 0; i < k; ++i) fresh = fresh && t.data<int32_t>()[n * c.top_k + i] != j;
      } while (!fresh);
      t.data<int32_t>()[n * c.top_k + k] = j;
    }
  }
  return t;
}

std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    v[i] = t.dtype() == DType::i64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
  }
  return v;
}

// ---- 1. reference backward vs central finite differences (fp64) ----

TEST(MoeDispatch, ReferenceBackwardMatchesFiniteDifferences) {
  for (const DispatchCase& c : {DispatchCase{3, 4, 4, 2}, DispatchCase{5, 2, 3, 3}}) {
    const int64_t p = c.n * c.top_k;
    const Tensor expert = random_experts(c, 1);
    const auto x0 = random_doubles(c.n * c.d, 2), r = random_doubles(p * c.d, 3);
    std::vector<int64_t> offsets(c.e + 1);
    std::vector<int32_t> row_of_pair(p), pair_of_row(p);
    auto loss = [&](const std::vector<double>& x) {  // sum(x_rows * r)
      std::vector<double> rows(p * c.d);
      ref::moe_dispatch_forward(c.n, c.d, c.e, c.top_k, x.data(), expert.data<int32_t>(),
                                rows.data(), offsets.data(), row_of_pair.data(),
                                pair_of_row.data());
      return dot(rows, r);
    };
    loss(x0);
    const auto dx0 = random_doubles(c.n * c.d, 4);  // dx is accumulated
    std::vector<double> dx = dx0;
    ref::moe_dispatch_backward(c.n, c.d, c.top_k, r.data(), row_of_pair.data(), dx.data());
    std::vector<double> want = numeric_gradient(loss, x0);
    for (size_t i = 0; i < want.size(); ++i) want[i] += dx0[i];
    EXPECT_TRUE(all_close("moe_dispatch_ref " + name(c) + " dx", dx, want, kFdTol));
  }
}

// ---- the layout of a small example, sorted by hand ----

TEST(MoeDispatch, LayoutIsAStableSortByExpert) {
  // Pairs q = n*K + k: experts 2 0 | 0 1 | 2 1; expert 3 gets none.
  Tensor expert = Tensor::empty({3, 2}, DType::i32);
  const int32_t chosen[] = {2, 0, 0, 1, 2, 1};
  std::memcpy(expert.data<int32_t>(), chosen, sizeof(chosen));
  const Tensor x = random_f32({3, 5}, 11);
  for (const MoeDispatchImpl& impl : moe_dispatch_table().impls()) {
    Tensor rows = Tensor::empty({6, 5});
    MoeLayout layout;
    impl.forward({4}, x, expert, rows, layout);
    EXPECT_EQ(ints(layout.offsets_E1), (std::vector<int64_t>{0, 2, 4, 6, 6})) << impl.name;
    EXPECT_EQ(ints(layout.pair_of_row_P), (std::vector<int64_t>{1, 2, 3, 5, 0, 4})) << impl.name;
    EXPECT_EQ(ints(layout.row_of_pair_NK), (std::vector<int64_t>{4, 0, 1, 2, 5, 3})) << impl.name;
    const int64_t token_of_row[] = {0, 1, 1, 2, 0, 2};
    for (int64_t r = 0; r < 6; ++r) {
      EXPECT_EQ(std::memcmp(rows.data<float>() + r * 5, x.data<float>() + token_of_row[r] * 5,
                            5 * sizeof(float)), 0) << impl.name << " row " << r;
    }
  }
}

// ---- 2. every kernel vs the reference, forward and backward ----

TEST(MoeDispatch, KernelsMatchReference) {
  const DispatchCase cases[] = {{1, 1, 1, 1}, {7, 9, 4, 2}, {9, 6, 3, 3}, {33, 19, 40, 3},
                                {300, 40, 16, 4}, {0, 5, 3, 2}};
  const MoeDispatchImpl& ref = moe_dispatch_table().ref();
  for (const DispatchCase& c : cases) {
    const int64_t p = c.n * c.top_k;
    const Tensor expert = random_experts(c, 21), x = random_f32({c.n, c.d}, 22);
    Tensor rows_ref = Tensor::empty({p, c.d});
    MoeLayout l_ref;
    ref.forward({c.e}, x, expert, rows_ref, l_ref);
    const Tensor drows = random_f32({p, c.d}, 23);
    Tensor dx_ref = random_f32({c.n, c.d}, 24);
    ref.backward({c.e}, drows, l_ref, dx_ref);
    for (const MoeDispatchImpl& impl : moe_dispatch_table().impls()) {
      const std::string where = impl.name + " " + name(c);
      Tensor rows = Tensor::empty({p, c.d});
      MoeLayout l;
      impl.forward({c.e}, x, expert, rows, l);
      EXPECT_EQ(ints(l.offsets_E1), ints(l_ref.offsets_E1)) << where;
      EXPECT_EQ(ints(l.row_of_pair_NK), ints(l_ref.row_of_pair_NK)) << where;
      EXPECT_EQ(ints(l.pair_of_row_P), ints(l_ref.pair_of_row_P)) << where;
      EXPECT_EQ(to_doubles(rows), to_doubles(rows_ref)) << where << ": rows are copies";
      Tensor dx = random_f32({c.n, c.d}, 24);
      impl.backward({c.e}, drows, l, dx);
      EXPECT_TRUE(all_close(where + " dx", dx, dx_ref, kF32Tol));
    }
  }
}

TEST(MoeDispatch, RejectsBadArguments) {
  const Tensor x = random_f32({4, 6}, 31);
  Tensor rows = Tensor::empty({8, 6});
  MoeLayout layout;
  std::string msg = error_of([&] {
    moe_dispatch_forward({3}, x, Tensor::zeros({4, 2}, DType::i64), rows, layout);
  });
  EXPECT_NE(msg.find("[moe_dispatch] expert: expected contiguous i32[4, top_k >= 1], got i64[4, 2]"),
            std::string::npos)
      << msg;
  msg = error_of([&] {
    moe_dispatch_forward({3}, x, Tensor::zeros({4, 3}, DType::i32), rows, layout);
  });
  EXPECT_NE(msg.find("[moe_dispatch] x_rows: expected contiguous f32[12, 6], got f32[8, 6]"),
            std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
}

}  // namespace
}  // namespace titan::ops
