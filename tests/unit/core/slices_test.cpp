#include "titan/core/slices.h"

#include <gtest/gtest.h>

#include <vector>

#include "titan/core/error.h"

namespace titan {
namespace {

std::vector<float> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<float>(c.data<float>(), c.data<float>() + c.numel());
}

// One part: rank r holds rows [r n/t, (r+1) n/t); parts: rank r's share of each, in order.
TEST(Slices, IndicesOfPlainAndSectionedSplits) {
  EXPECT_EQ(slice_indices(6, {}, 1, 3), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(slice_indices(8, {2, 2, 4}, 0, 2), (std::vector<int64_t>{0, 2, 4, 5}));
  EXPECT_EQ(slice_indices(8, {2, 2, 4}, 1, 2), (std::vector<int64_t>{1, 3, 6, 7}));
  EXPECT_THROW(slice_indices(8, {2, 2, 3}, 0, 2), Error);  // parts do not sum to 8
  EXPECT_THROW(slice_indices(9, {3, 6}, 0, 2), Error);     // 3 does not split in two
  EXPECT_THROW(slice_indices(4, {}, 2, 2), Error);
  EXPECT_TRUE(sections_divide(8, {2, 2, 4}, 2));
  EXPECT_FALSE(sections_divide(8, {2, 2, 4}, 4));
  EXPECT_FALSE(sections_divide(6, {}, 4));
}

// take_along along each dim of a [2, 4, 3] tensor equals picking the entries one by one, and
// put_along of every rank's slice rebuilds the whole.
TEST(Slices, TakeAndPutAlongEveryDim) {
  Tensor t = Tensor::empty({2, 4, 3});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  for (int dim = 0; dim < 3; ++dim) {
    const int64_t size = t.size(dim);
    const std::vector<int64_t> idx = {size - 1, 0};
    const Tensor got = take_along(t, dim, idx);
    std::vector<float> want;
    for (int64_t a = 0; a < 2; ++a) {
      for (int64_t b = 0; b < (dim == 1 ? 2 : 4); ++b) {
        for (int64_t c = 0; c < (dim == 2 ? 2 : 3); ++c) {
          const int64_t i0 = dim == 0 ? idx[static_cast<size_t>(a)] : a;
          const int64_t i1 = dim == 1 ? idx[static_cast<size_t>(b)] : b;
          const int64_t i2 = dim == 2 ? idx[static_cast<size_t>(c)] : c;
          want.push_back(t.data<float>()[(i0 * 4 + i1) * 3 + i2]);
        }
      }
    }
    EXPECT_EQ(values(got), want) << "dim " << dim;
  }
  const Tensor m = t.reshape({8, 3});
  Tensor back = Tensor::zeros({8, 3});
  for (int64_t r = 0; r < 2; ++r) {
    const std::vector<int64_t> idx = slice_indices(8, {2, 6}, r, 2);
    put_along(back, 0, idx, take_along(m, 0, idx));
  }
  EXPECT_EQ(values(back), values(m));
  EXPECT_THROW(put_along(back, 0, {0, 1}, Tensor::zeros({3, 3})), Error);
  EXPECT_THROW(take_along(m, 0, {8}), Error);
}

}  // namespace
}  // namespace titan
