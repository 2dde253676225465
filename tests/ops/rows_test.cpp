// Row moves (gather and its scatter gradient, strided rows, masked rows): every implementation
// against the reference (copies and zeros, so exactly), the gather's gradient against finite
// differences, values from math, and the one-line errors.
#include "titan/ops/rows/rows.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct GatherCase {
  int64_t n, m, d;
  DType index_dtype;
};

std::string gather_name(const GatherCase& c) {
  return str("N=", c.n, " M=", c.m, " D=", c.d, " ", dtype_name(c.index_dtype));
}

// M distinct rows of [0, N) in a scrambled order (a permutation when M == N): the backward's
// contract.
Tensor distinct_index(const GatherCase& c) {
  std::vector<int64_t> rows(static_cast<size_t>(c.n));
  std::iota(rows.begin(), rows.end(), 0);
  for (size_t i = rows.size(); i > 1; --i) std::swap(rows[i - 1], rows[(i * 7919 + 13) % i]);
  Tensor index = Tensor::empty({c.m}, c.index_dtype);
  for (int64_t i = 0; i < c.m; ++i) {
    if (c.index_dtype == DType::i32) {
      index.data<int32_t>()[i] = static_cast<int32_t>(rows[static_cast<size_t>(i)]);
    } else {
      index.data<int64_t>()[i] = rows[static_cast<size_t>(i)];
    }
  }
  return index;
}

std::vector<GatherCase> gather_cases() {
  return {{1, 1, 1, DType::i32},   {5, 5, 1, DType::i32},      {7, 3, 13, DType::i64},
          {9, 9, 17, DType::i32},  {33, 20, 5, DType::i64},    {4099, 4099, 17, DType::i32},
          {6, 0, 4, DType::i64},   {2049, 1000, 129, DType::i64}};
}

RefFunction gather_reference(const GatherCase& c) {
  const Tensor index = distinct_index(c);
  auto forward = [=](const std::vector<Doubles>& in) {
    Doubles y(static_cast<size_t>(c.m * c.d));
    ref::rows_gather_forward(c.m, c.d, in[0].data(), index.data<int32_t>(), y.data());
    return y;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    Doubles dx(in[0].size(), 7.0);  // a permutation writes every row: 7 must not survive
    ref::rows_gather_backward(c.m, c.d, dy.data(), index.data<int32_t>(), dx.data());
    return std::vector<Doubles>{dx};
  };
  return {{"x"}, {random_doubles(static_cast<size_t>(c.n * c.d), 3)}, forward, backward};
}

OpTest<RowsGatherImpl, GatherCase> gather_test() {
  return {
      .table = &rows_gather_table(),
      .cases = gather_cases(),
      .name = gather_name,
      .forward = [](const RowsGatherImpl& impl, const GatherCase& c) -> Outputs {
        Tensor y = garbage({c.m, c.d});
        impl.forward(random_f32({c.n, c.d}, 1), distinct_index(c), y);
        return {{"y", y, kExact}};
      },
      .backward = [](const RowsGatherImpl& impl, const GatherCase& c) -> Outputs {
        Tensor dx = random_f32({c.n, c.d}, 5);  // rows the index does not name stay as they are
        impl.backward(random_f32({c.m, c.d}, 2), distinct_index(c), dx);
        return {{"dx", dx, kExact}};
      },
      .threads = {1, 3},
      .reference = gather_reference,
      .fd_cases = {{1, 1, 1, DType::i32}, {5, 5, 3, DType::i32}, {9, 9, 7, DType::i32}},
  };
}

TEST(RowsGather, ReferenceBackwardMatchesFiniteDifferences) { sweep(gather_test(), {Mode::gradient}); }
TEST(RowsGather, KernelsMatchReference) { sweep(gather_test(), {Mode::forward, Mode::backward}); }

// x[r] = (100 r + j): the gathered rows are known by value.
TEST(RowsGather, ValuesFromMath) {
  Tensor x = Tensor::empty({4, 3});
  for (int64_t i = 0; i < 12; ++i) x.data<float>()[i] = static_cast<float>(100 * (i / 3) + i % 3);
  Tensor index = Tensor::empty({3}, DType::i32);
  index.data<int32_t>()[0] = 2, index.data<int32_t>()[1] = 0, index.data<int32_t>()[2] = 3;
  for (const RowsGatherImpl& impl : rows_gather_table().impls()) {
    Tensor y = garbage({3, 3});
    impl.forward(x, index, y);
    EXPECT_EQ(to_doubles(y), (Doubles{200, 201, 202, 0, 1, 2, 300, 301, 302})) << impl.name;
    Tensor dx = Tensor::zeros({4, 3});
    dx.fill_(-1.0f);
    impl.backward(y, index, dx);  // scatter back: row 1 is not named and stays -1
    EXPECT_EQ(to_doubles(dx), (Doubles{0, 1, 2, -1, -1, -1, 200, 201, 202, 300, 301, 302})) << impl.name;
  }
}

struct StridedCase {
  int64_t n, d, start, step, m;
};

OpTest<RowsStridedImpl, StridedCase> strided_test() {
  return {
      .table = &rows_strided_table(),
      .cases = {{1, 1, 0, 1, 1}, {12, 5, 3, 4, 3}, {7, 13, 6, 7, 1}, {9, 3, 2, 0, 4}, {40000, 3, 1, 2, 19999},
                {5, 4, 0, 1, 0}},
      .name = [](const StridedCase& c) { return str("N=", c.n, " D=", c.d, " start=", c.start, " step=", c.step); },
      .forward = [](const RowsStridedImpl& impl, const StridedCase& c) -> Outputs {
        Tensor y = garbage({c.m, c.d});
        impl.forward(random_f32({c.n, c.d}, 1), c.start, c.step, y);
        return {{"y", y, kExact}};
      },
      .threads = {1, 3},
  };
}

TEST(RowsStrided, KernelsMatchReference) { sweep(strided_test(), {Mode::forward}); }

// A decoder's last token per sequence: B = 3 sequences of S = 4 tokens, rows 3, 7, 11.
TEST(RowsStrided, LastTokenOfEachSequence) {
  Tensor x = Tensor::empty({12, 2});
  for (int64_t i = 0; i < 24; ++i) x.data<float>()[i] = static_cast<float>(i);
  for (const RowsStridedImpl& impl : rows_strided_table().impls()) {
    Tensor y = garbage({3, 2});
    impl.forward(x, 3, 4, y);
    EXPECT_EQ(to_doubles(y), (Doubles{6, 7, 14, 15, 22, 23})) << impl.name;
  }
}

// A transpose of a grid of rows: x's 6 one-element rows as a [2, 3] grid (0 1 2 / 3 4 5) become
// the [3, 2] grid (0 3 / 1 4 / 2 5); rows of width 2 move whole. A bad grid is a one-line error.
TEST(RowsTranspose, GridOfRowsFromMath) {
  Tensor x = Tensor::empty({6, 1});
  for (int64_t i = 0; i < 6; ++i) x.data<float>()[i] = static_cast<float>(i);
  Tensor y = garbage({6, 1});
  rows_transpose(x, 2, 3, y);
  EXPECT_EQ(to_doubles(y), (Doubles{0, 3, 1, 4, 2, 5}));
  Tensor w = Tensor::empty({4, 2});
  for (int64_t i = 0; i < 8; ++i) w.data<float>()[i] = static_cast<float>(i);
  Tensor v = garbage({4, 2});
  rows_transpose(w, 2, 2, v);
  EXPECT_EQ(to_doubles(v), (Doubles{0, 1, 4, 5, 2, 3, 6, 7}));
  EXPECT_THROW(rows_transpose(x, 4, 2, y), std::exception);
}

struct MaskCase {
  int64_t n, d;
};

Tensor mask_of(int64_t n) {  // every third row, and row 1
  Tensor mask = Tensor::empty({n}, DType::i32);
  for (int64_t i = 0; i < n; ++i) mask.data<int32_t>()[i] = (i % 3 == 0 || i == 1) ? 1 + static_cast<int32_t>(i) : 0;
  return mask;
}

OpTest<RowsMaskImpl, MaskCase> mask_test() {
  return {
      .table = &rows_mask_table(),
      .cases = {{1, 1}, {2, 7}, {7, 13}, {33, 17}, {5001, 19}, {0, 3}},
      .name = [](const MaskCase& c) { return str("N=", c.n, " D=", c.d); },
      .forward = [](const RowsMaskImpl& impl, const MaskCase& c) -> Outputs {
        Tensor x = random_f32({c.n, c.d}, 4);
        impl.forward(mask_of(c.n), x);
        return {{"x", x, kExact}};
      },
      .threads = {1, 3},
  };
}

TEST(RowsMask, KernelsMatchReference) { sweep(mask_test(), {Mode::forward}); }

TEST(RowsMask, ZeroesExactlyTheMarkedRows) {
  for (const RowsMaskImpl& impl : rows_mask_table().impls()) {
    Tensor x = Tensor::empty({4, 2});
    x.fill_(2.5f);
    impl.forward(mask_of(4), x);  // rows 0, 1, 3 marked
    EXPECT_EQ(to_doubles(x), (Doubles{0, 0, 0, 0, 2.5, 2.5, 0, 0})) << impl.name;
  }
}

TEST(Rows, EveryImplementationIsRegistered) {
  EXPECT_EQ(rows_gather_table().impls().back().name, "rows_gather_cpu");
  EXPECT_EQ(rows_strided_table().impls().back().name, "rows_strided_cpu");
  EXPECT_EQ(rows_mask_table().impls().back().name, "rows_mask_cpu");
}

TEST(Rows, ErrorsNameTheTensor) {
  Tensor x = Tensor::empty({4, 3}), y = Tensor::empty({2, 3}), bad_y = Tensor::empty({2, 4});
  Tensor index = Tensor::zeros({2}, DType::i32), far = Tensor::zeros({2}, DType::i64);
  far.data<int64_t>()[1] = 4;
  EXPECT_NE(error_of([&] { rows_gather_forward(x, index, bad_y); }).find("[rows_gather] y_MD"), std::string::npos);
  EXPECT_NE(error_of([&] { rows_gather_forward(x, Tensor::zeros({3}, DType::i32), y); }).find("index_M"),
            std::string::npos);
  EXPECT_NE(error_of([&] { rows_gather_forward(x, far, y); }).find("index_M[1] = 4"), std::string::npos);
  EXPECT_NE(error_of([&] { rows_strided_forward(x, 1, 3, y); }).find("[rows_strided]"), std::string::npos);
  EXPECT_NE(error_of([&] { rows_mask(Tensor::zeros({3}, DType::i32), x); }).find("[rows_mask] mask_N"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
