// MoE dispatch: case list for the shared harness (op_harness.h), plus the layout of a hand-sorted
// example and bad arguments.
#include "titan/ops/moe_dispatch/moe_dispatch.h"

#include <cstring>

#include "ops/op_harness.h"
#include "titan/core/rng.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t n, d, e, top_k;
};

std::string name(const Case& c) {
  return str("n=", c.n, " d=", c.d, " e=", c.e, " k=", c.top_k);
}

// Distinct experts per token (as the router chooses them), drawn so that some experts stay empty
// when E is large.
Tensor random_experts(const Case& c, uint64_t seed) {
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

// The fp64 reference of x, for fixed experts. dx is accumulated: backward starts it from non-zero
// values and takes them off after, so that a reference that wrote dx would fail.
RefFunction moe_dispatch_reference(const Case& c) {
  const int64_t p = c.n * c.top_k;
  const Tensor expert = random_experts(c, 1);
  struct Layout {
    std::vector<int64_t> offsets;
    std::vector<int32_t> row_of_pair, pair_of_row;
  };
  auto run = [=](const Doubles& x, Layout& l) {
    Doubles rows(p * c.d);
    l = {std::vector<int64_t>(c.e + 1), std::vector<int32_t>(p), std::vector<int32_t>(p)};
    ref::moe_dispatch_forward(c.n, c.d, c.e, c.top_k, x.data(), expert.data<int32_t>(), rows.data(),
                              l.offsets.data(), l.row_of_pair.data(), l.pair_of_row.data());
    return rows;
  };
  auto forward = [=](const std::vector<Doubles>& in) {
    Layout l;
    return run(in[0], l);
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& drows) {
    Layout l;
    run(in[0], l);
    const Doubles dx0 = random_doubles(c.n * c.d, 4);
    Doubles dx = dx0;
    ref::moe_dispatch_backward(c.n, c.d, c.top_k, drows.data(), l.row_of_pair.data(), dx.data());
    for (size_t i = 0; i < dx.size(); ++i) dx[i] -= dx0[i];
    return std::vector<Doubles>{dx};
  };
  return {{"x"}, {random_doubles(c.n * c.d, 2)}, forward, backward};
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

// Small sizes, one expert, more experts than pairs (empty experts), a token count past the
// kernel's blocks, no tokens.
const Case kCases[] = {{1, 1, 1, 1}, {7, 9, 4, 2}, {9, 6, 3, 3}, {33, 19, 40, 3}, {300, 40, 16, 4}, {0, 5, 3, 2}};

struct Inputs {
  Tensor x, expert, drows;
};
Inputs inputs(const Case& c) {
  return {random_f32({c.n, c.d}, 22), random_experts(c, 21), random_f32({c.n * c.top_k, c.d}, 23)};
}

// The layout is integers and the rows are copies: all compared exactly.
OpTest<MoeDispatchImpl, Case> moe_dispatch_test() {
  return {
      .table = &moe_dispatch_table(),
      .cases = {std::begin(kCases), std::end(kCases)},
      .name = name,
      .supports = [](const MoeDispatchImpl& impl, const Case& c) {
        const Inputs in = inputs(c);
        return impl.supports({c.e}, in.x, in.expert);
      },
      .forward = [](const MoeDispatchImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor rows = garbage({c.n * c.top_k, c.d});
        MoeLayout l;
        impl.forward({c.e}, in.x, in.expert, rows, l);
        return {{"x_rows", rows, kExact},
                {"offsets", l.offsets_E1},
                {"row_of_pair", l.row_of_pair_NK},
                {"pair_of_row", l.pair_of_row_P}};
      },
      // Each implementation's backward reads its own forward's layout.
      .backward = [](const MoeDispatchImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor rows = Tensor::empty({c.n * c.top_k, c.d});
        MoeLayout l;
        impl.forward({c.e}, in.x, in.expert, rows, l);
        Tensor dx = random_f32({c.n, c.d}, 24);  // accumulates: the same non-zero start in every run
        impl.backward({c.e}, in.drows, l, dx);
        return {{"dx", dx}};
      },
      .reference = moe_dispatch_reference,
      .fd_cases = {{3, 4, 4, 2}, {5, 2, 3, 3}},
  };
}

TEST(MoeDispatch, ReferenceBackwardMatchesFiniteDifferences) { sweep(moe_dispatch_test(), {Mode::gradient}); }

TEST(MoeDispatch, KernelsMatchReference) { sweep(moe_dispatch_test(), {Mode::forward, Mode::backward}); }

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
