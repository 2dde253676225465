// Embedding: case list for the shared harness, plus the out-of-range id error.
#include "titan/ops/embedding/embedding.h"

#include "titan/core/rng.h"
#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  Shape ids;  // any shape; read flat
  int64_t v, d;
  DType id_dtype = DType::i64;
};
// Small vocabs force repeated ids (the scatter-add must sum them); widths below, at and past
// the 16-lane vector; ids of rank 1 and 2.
const Case kShapes[] = {{{1}, 1, 1},      {{5}, 3, 7},        {{2, 4}, 4, 16},   {{9}, 6, 33},
                        {{3, 5}, 50, 64}, {{300}, 7, 130},    {{4, 16}, 1000, 48}, {{2, 8}, 5, 1024}};

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const Case& c : kShapes) {
    for (DType dtype : {DType::i64, DType::i32}) all.push_back({c.ids, c.v, c.d, dtype});
  }
  return all;
}

std::string name(const Case& c) {
  return str("ids=", dtype_name(c.id_dtype), shape_str(c.ids), " v=", c.v, " d=", c.d);
}

std::vector<int64_t> random_ids(const Case& c, uint64_t seed) {
  std::vector<int64_t> ids(shape_numel(c.ids));
  Rng(seed).fill_int(ids.data(), static_cast<int64_t>(ids.size()), c.v);
  return ids;
}

Tensor ids_tensor(const std::vector<int64_t>& ids, const Shape& shape, DType dtype) {
  Tensor t = Tensor::empty(shape, dtype);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (dtype == DType::i64) {
      t.data<int64_t>()[i] = ids[i];
    } else {
      t.data<int32_t>()[i] = static_cast<int32_t>(ids[i]);
    }
  }
  return t;
}

struct Inputs {
  Tensor ids, table, dy;
};
Inputs inputs(const Case& c) {
  const int64_t n = shape_numel(c.ids);
  return {ids_tensor(random_ids(c, 10), c.ids, c.id_dtype), random_f32({c.v, c.d}, 11), random_f32({n, c.d}, 12)};
}

RefFunction embedding_reference(const Case& c) {
  const int64_t n = shape_numel(c.ids);
  const std::vector<int64_t> ids = random_ids(c, 1);
  // The differentiable input: the table (ids are integers).
  auto forward = [=](const std::vector<Doubles>& in) {
    Doubles y(n * c.d);
    ref::embedding_forward(n, c.d, ids.data(), in[0].data(), y.data());
    return y;
  };
  auto backward = [=](const std::vector<Doubles>&, const Doubles& dy) {
    Doubles dtable(c.v * c.d, 0.0);
    ref::embedding_backward(n, c.d, ids.data(), dy.data(), dtable.data());
    return std::vector<Doubles>{dtable};
  };
  return {{"table"}, {random_doubles(c.v * c.d, 2)}, forward, backward};
}

// A gather and an in-order scatter-add: every implementation gives the reference's bits exactly,
// for any thread count.
OpTest<EmbeddingImpl, Case> embedding_test() {
  return {
      .table = &embedding_table(),
      .cases = cases(),
      .name = name,
      .supports = [](const EmbeddingImpl& impl, const Case& c) {
        const Inputs in = inputs(c);
        return impl.supports(in.ids, in.table);
      },
      .forward = [](const EmbeddingImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor y = garbage({in.ids.numel(), c.d});
        impl.forward(in.ids, in.table, y);
        return {{"y", y, kExact}};
      },
      .backward = [](const EmbeddingImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor dtable = random_f32({c.v, c.d}, 13);  // accumulates: the same non-zero start in every run
        impl.backward(in.ids, in.dy, dtable);
        return {{"dtable", dtable, kExact}};
      },
      .threads = {1, 2, 3},
      .reference = embedding_reference,
      .fd_cases = {std::begin(kShapes), std::end(kShapes)},  // the id dtype does not change the math
  };
}

TEST(Embedding, ReferenceBackwardMatchesFiniteDifferences) { sweep(embedding_test(), {Mode::gradient}); }

TEST(Embedding, KernelsMatchReference) { sweep(embedding_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

// Two rows of ids hitting the same token: y copies table rows; dtable sums both dy rows onto
// the existing value (values from arithmetic).
TEST(Embedding, DispatchGathersAndAccumulates) {
  const Tensor ids = ids_tensor({2, 0, 2}, {1, 3}, DType::i64);
  const Tensor table = from_doubles({1, 2, 3, 4, 5, 6}, {3, 2});
  Tensor y = Tensor::empty({3, 2});
  embedding_forward(ids, table, y);
  EXPECT_TRUE(all_close("embedding y", to_doubles(y), {5, 6, 1, 2, 5, 6}, {0, 0}));
  const Tensor dy = from_doubles({1, 10, 100, 1000, 0.5, 0.25}, {3, 2});
  Tensor dtable = from_doubles({1, 1, 1, 1, 1, 1}, {3, 2});
  embedding_backward(ids, dy, dtable);
  EXPECT_TRUE(all_close("embedding dtable", to_doubles(dtable), {101, 1001, 1, 1, 2.5, 11.25}, {0, 0}));
}

using testing::error_of;

TEST(Embedding, RejectsOutOfRangeIds) {
  const Tensor table = random_f32({5, 4}, 1);
  Tensor y = Tensor::empty({4, 4});
  const Tensor too_big = ids_tensor({0, 3, 5, 7}, {4}, DType::i64);
  std::string msg = error_of([&] { embedding_forward(too_big, table, y); });
  EXPECT_NE(msg.find("[embedding] ids: id 5 at index 2 is outside [0, 5)"), std::string::npos) << msg;

  const Tensor negative = ids_tensor({0, -1, 1, 1}, {2, 2}, DType::i32);
  msg = error_of([&] { embedding_forward(negative, table, y); });
  EXPECT_NE(msg.find("[embedding] ids: id -1 at index 1 is outside [0, 5)"), std::string::npos) << msg;

  // The backward checks before it touches dtable.
  Tensor dtable = Tensor::zeros({5, 4});
  const Tensor dy = random_f32({4, 4}, 2);
  EXPECT_THROW(embedding_backward(too_big, dy, dtable), Error);
  EXPECT_TRUE(all_close("dtable untouched", to_doubles(dtable), std::vector<double>(20, 0.0), {0, 0}));
}

TEST(Embedding, RejectsBadShapes) {
  const Tensor ids = ids_tensor({0, 1, 2}, {3}, DType::i64), table = random_f32({5, 4}, 1);
  Tensor y = Tensor::empty({3, 5});
  std::string msg = error_of([&] { embedding_forward(ids, table, y); });
  EXPECT_NE(msg.find("[embedding] y: expected contiguous f32[3, 4]"), std::string::npos) << msg;
  const Tensor float_ids = random_f32({3}, 2);
  msg = error_of([&] { embedding_forward(float_ids, table, y); });
  EXPECT_NE(msg.find("[embedding] ids: expected a contiguous i64 or i32 tensor, got f32[3]"), std::string::npos)
      << msg;
}

}  // namespace
}  // namespace titan::ops
