// Token positions: every implementation against the reference over training, decode and padding
// cases (integers, so exactly), values written out from the formula by hand, and the one-line
// errors.
#include "titan/ops/positions/positions.h"

#include <string>
#include <vector>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct PositionsCase {
  int64_t batch, seq, start;
  std::vector<int64_t> begin;  // empty: undefined begin_B
  DType dtype;
  bool padding_mask = false;
};

std::string name(const PositionsCase& c) {
  return str("B=", c.batch, " S=", c.seq, " start=", c.start, c.begin.empty() ? " no begin" : " begin",
             " ", dtype_name(c.dtype), c.padding_mask ? " padding mask" : "");
}

Tensor begin_of(const PositionsCase& c) {
  if (c.begin.empty()) return Tensor();
  Tensor t = Tensor::empty({c.batch}, DType::i64);
  for (int64_t b = 0; b < c.batch; ++b) t.data<int64_t>()[b] = c.begin[static_cast<size_t>(b)];
  return t;
}

// Training blocks (odd sizes, one big enough to split over threads), decode steps with left
// padding longer than, equal to and shorter than the slots so far, and i32 iotas.
std::vector<PositionsCase> cases() {
  return {{1, 1, 0, {}, DType::i64},          {3, 7, 0, {}, DType::i64},
          {5, 13, 0, {}, DType::i32},         {9, 40961, 0, {}, DType::i64},
          {3, 5, 0, {0, 2, 4}, DType::i64},   {3, 1, 6, {0, 2, 9}, DType::i64},
          {4, 3, 2, {0, 2, 3, 7}, DType::i64}, {1, 100003, 0, {}, DType::i32},
          {2, 0, 4, {1, 2}, DType::i64},      {0, 5, 0, {}, DType::i64},
          {4, 3, 2, {0, 2, 3, 7}, DType::i32, true}, {3, 5, 0, {0, 2, 4}, DType::i32, true},
          {2, 40000, 0, {5, 39999}, DType::i32, true}};
}

OpTest<PositionsImpl, PositionsCase> positions_test() {
  return {
      .table = &positions_table(),
      .cases = cases(),
      .name = name,
      .forward = [](const PositionsImpl& impl, const PositionsCase& c) -> Outputs {
        Tensor pos = Tensor::empty({c.batch * c.seq}, c.dtype);
        if (pos.numel() > 0) std::fill_n(static_cast<char*>(pos.raw_data()), pos.nbytes(), 0x5a);  // garbage
        impl.forward({c.batch, c.seq, c.start, c.padding_mask}, begin_of(c), pos);
        return {{"pos", pos}};
      },
      .threads = {1, 3},
  };
}

TEST(Positions, KernelsMatchReference) { sweep(positions_test(), {Mode::forward}); }

TEST(Positions, EveryImplementationIsRegistered) {
  ASSERT_EQ(positions_table().impls().size(), 2u);
  EXPECT_EQ(positions_table().ref().name, "positions_ref");
  EXPECT_EQ(positions_table().impls()[1].name, "positions_cpu");
}

// Written out by hand from pos[b, s] = max(0, start + s - begin[b]).
TEST(Positions, ValuesFromTheFormula) {
  for (const PositionsImpl& impl : positions_table().impls()) {
    Tensor train = Tensor::empty({6}, DType::i64);
    impl.forward({2, 3, 0}, Tensor(), train);
    EXPECT_EQ(to_doubles(train), (std::vector<double>{0, 1, 2, 0, 1, 2})) << impl.name;

    // Three prompts left-padded to 4 slots (begin 0, 1, 3); the block holds slots 2..4.
    const PositionsCase c{3, 3, 2, {0, 1, 3}, DType::i64};
    Tensor decode = Tensor::empty({9}, DType::i64);
    impl.forward({c.batch, c.seq, c.start}, begin_of(c), decode);
    EXPECT_EQ(to_doubles(decode), (std::vector<double>{2, 3, 4, 1, 2, 3, 0, 0, 1})) << impl.name;

    Tensor iota = Tensor::empty({5}, DType::i32);
    impl.forward({1, 5, 0}, Tensor(), iota);
    EXPECT_EQ(to_doubles(iota), (std::vector<double>{0, 1, 2, 3, 4})) << impl.name;
  }
  // Through dispatch.
  EXPECT_EQ(to_doubles(make_positions({2, 2, 3})), (std::vector<double>{3, 4, 3, 4}));
  // The padding mask of the decode block above: 1 on slots before each row's begin.
  for (const PositionsImpl& impl : positions_table().impls()) {
    const PositionsCase c{3, 3, 2, {0, 1, 3}, DType::i32, true};
    Tensor mask = Tensor::empty({9}, DType::i32);
    impl.forward({c.batch, c.seq, c.start, true}, begin_of(c), mask);
    EXPECT_EQ(to_doubles(mask), (std::vector<double>{0, 0, 0, 0, 0, 0, 1, 0, 0})) << impl.name;
  }
}

TEST(Positions, ShapeErrorsNameTheTensor) {
  Tensor f = Tensor::empty({6});
  EXPECT_NE(error_of([&] { positions_forward({2, 3, 0}, Tensor(), f); }).find("[positions] pos_N"), std::string::npos);
  Tensor short_pos = Tensor::empty({5}, DType::i64);
  EXPECT_NE(error_of([&] { positions_forward({2, 3, 0}, Tensor(), short_pos); }).find("6 elements"),
            std::string::npos);
  Tensor pos = Tensor::empty({6}, DType::i64), begin = Tensor::empty({3}, DType::i64);
  EXPECT_NE(error_of([&] { positions_forward({2, 3, 0}, begin, pos); }).find("[positions] begin_B"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
