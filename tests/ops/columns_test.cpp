// The column block: kernels against the reference (bits), and splitting rows into pieces then
// writing each piece's gradient back reassembles the rows exactly.
#include "titan/ops/columns/columns.h"

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t rows, width, start, count;
};

std::vector<Case> cases() { return {{1, 1, 0, 1}, {3, 8, 4, 4}, {5, 16, 3, 9}, {600, 512, 256, 256}, {7, 96, 0, 32}}; }
std::string name(const Case& c) { return str("N=", c.rows, " F=", c.width, " [", c.start, ", ", c.start + c.count, ")"); }

OpTest<ColumnsImpl, Case> columns_test() {
  return {
      .table = &columns_table(),
      .cases = cases(),
      .name = name,
      .forward = [](const ColumnsImpl& impl, const Case& c) -> Outputs {
        Tensor y = garbage({c.rows, c.count});
        impl.forward(random_f32({c.rows, c.width}, 61), c.start, y);
        return {{"y", y, kExact}};
      },
      .backward = [](const ColumnsImpl& impl, const Case& c) -> Outputs {
        Tensor dx = random_f32({c.rows, c.width}, 62);  // the other columns must stay
        impl.backward(random_f32({c.rows, c.count}, 63), c.start, dx);
        return {{"dx", dx, kExact}};
      },
      .threads = {1, 2},
  };
}

TEST(Columns, KernelsMatchReference) { sweep(columns_test(), {Mode::forward, Mode::backward}); }

// [query | gate] rows split into their two halves and written back: the rows again, bit for bit.
TEST(Columns, SplitAndWriteBackIsTheIdentity) {
  const Tensor x = random_f32({12, 10}, 1);
  for (const ColumnsImpl& impl : columns_table().impls()) {
    Tensor a = Tensor::empty({12, 6}), b = Tensor::empty({12, 4}), back = garbage({12, 10});
    impl.forward(x, 0, a);
    impl.forward(x, 6, b);
    impl.backward(a, 0, back);
    impl.backward(b, 6, back);
    EXPECT_TRUE(all_close(impl.name, back, x, kExact));
  }
}

TEST(Columns, ABlockPastTheRowIsAnError) {
  const Tensor x = Tensor::zeros({2, 8});
  Tensor y = Tensor::empty({2, 5});
  EXPECT_NE(error_of([&] { columns_forward(x, 4, y); }).find("[columns] columns [4, 9) of 2 rows do not fit in f32[2, 8]"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
