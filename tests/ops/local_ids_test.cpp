// Local ids of a vocabulary-parallel embedding: every implementation against the reference
// (integers, so exactly), values from the rule by hand (both edges of the slice), and the
// one-line errors.
#include "titan/ops/local_ids/local_ids.h"

#include <string>
#include <vector>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct LocalIdsCase {
  int64_t n, vocab, start, size;
};

// Ids spread over [-3, vocab + 3) so that both sides of the slice and its edges occur.
Tensor ids_of(const LocalIdsCase& c) {
  Tensor ids = Tensor::empty({c.n}, DType::i64);
  for (int64_t i = 0; i < c.n; ++i) ids.data<int64_t>()[i] = (i * 7919 + 11) % (c.vocab + 6) - 3;
  return ids;
}

OpTest<LocalIdsImpl, LocalIdsCase> local_ids_test() {
  return {
      .table = &local_ids_table(),
      .cases = {{1, 10, 0, 5}, {7, 10, 5, 5}, {13, 17, 4, 9}, {33, 100, 0, 100}, {100003, 1000, 250, 250},
                {0, 4, 0, 2}},
      .name = [](const LocalIdsCase& c) { return str("N=", c.n, " V=", c.vocab, " rows [", c.start, ", ",
                                                     c.start + c.size, ")"); },
      .forward = [](const LocalIdsImpl& impl, const LocalIdsCase& c) -> Outputs {
        Tensor local = Tensor::empty({c.n}, DType::i64), outside = Tensor::empty({c.n}, DType::i32);
        if (c.n > 0) {
          std::fill_n(local.data<int64_t>(), c.n, int64_t{-77});
          std::fill_n(outside.data<int32_t>(), c.n, -77);
        }
        impl.forward({c.start, c.size}, ids_of(c), local, outside);
        return {{"local", local}, {"outside", outside}};
      },
      .threads = {1, 3},
  };
}

TEST(LocalIds, KernelsMatchReference) { sweep(local_ids_test(), {Mode::forward}); }

TEST(LocalIds, ValuesFromTheRule) {
  // Rank holding rows [4, 8): ids 3 and 8 sit just outside, 4 and 7 on the edges.
  Tensor ids = Tensor::empty({7}, DType::i64);
  const int64_t v[] = {3, 4, 5, 7, 8, 0, 100};
  std::copy(std::begin(v), std::end(v), ids.data<int64_t>());
  for (const LocalIdsImpl& impl : local_ids_table().impls()) {
    Tensor local = Tensor::empty({7}, DType::i64), outside = Tensor::empty({7}, DType::i32);
    impl.forward({4, 4}, ids, local, outside);
    EXPECT_EQ(to_doubles(local), (std::vector<double>{0, 0, 1, 3, 0, 0, 0})) << impl.name;
    EXPECT_EQ(to_doubles(outside), (std::vector<double>{1, 0, 0, 0, 1, 1, 1})) << impl.name;
  }
  EXPECT_EQ(local_ids_table().impls().back().name, "local_ids_cpu");
}

TEST(LocalIds, ErrorsNameTheTensor) {
  Tensor ids = Tensor::zeros({4}, DType::i64), local = Tensor::empty({4}, DType::i64);
  Tensor outside = Tensor::empty({4}, DType::i32), short_outside = Tensor::empty({3}, DType::i32);
  EXPECT_NE(error_of([&] { local_ids_forward({0, 2}, ids, local, short_outside); }).find("[local_ids] outside_N"),
            std::string::npos);
  EXPECT_NE(error_of([&] { local_ids_forward({0, 2}, Tensor::zeros({4}, DType::i32), local, outside); })
                .find("[local_ids] ids_N"),
            std::string::npos);
  EXPECT_NE(error_of([&] { local_ids_forward({0, 0}, ids, local, outside); }).find("size > 0"), std::string::npos);
}

}  // namespace
}  // namespace titan::ops
