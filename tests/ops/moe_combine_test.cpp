// MoE combine: case list for the shared harness (op_harness.h), weighted and unweighted, plus
// bad arguments.
#include "titan/ops/moe_combine/moe_combine.h"

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t n, d, top_k;
  bool weighted = false;  // unweighted: no weights, no dweight (the MoE block's form)
};

std::string name(const Case& c) {
  return str("n=", c.n, " d=", c.d, " k=", c.top_k, c.weighted ? " weighted" : "");
}

// row_of_pair: the pairs in a fixed scrambled order (q * 7 + 3 mod P, P coprime with 7 here, else
// reversed), so that a token's rows are not adjacent.
Tensor make_row_of_pair(const Case& c) {
  const int64_t p = c.n * c.top_k;
  Tensor t = Tensor::empty({c.n, c.top_k}, DType::i32);
  for (int64_t q = 0; q < p; ++q) {
    t.data<int32_t>()[q] = static_cast<int32_t>(p % 7 != 0 ? (q * 7 + 3) % p : p - 1 - q);
  }
  return t;
}

// The fp64 reference of y (and the weights, when weighted), for a fixed row_of_pair. Both
// gradients are written: they start from 7, which must not survive.
RefFunction moe_combine_reference(const Case& c) {
  const int64_t p = c.n * c.top_k;
  const Tensor rop = make_row_of_pair(c);
  auto forward = [=](const std::vector<Doubles>& in) {
    Doubles out(c.n * c.d);
    ref::moe_combine_forward(c.n, c.d, c.top_k, in[0].data(), c.weighted ? in[1].data() : nullptr,
                             rop.data<int32_t>(), out.data());
    return out;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dout) {
    Doubles dy(p * c.d, 7.0), dweight(p, 7.0);
    ref::moe_combine_backward(c.n, c.d, c.top_k, dout.data(), in[0].data(),
                              c.weighted ? in[1].data() : nullptr, rop.data<int32_t>(), dy.data(),
                              dweight.data());
    if (!c.weighted) return std::vector<Doubles>{dy};
    return std::vector<Doubles>{dy, dweight};
  };
  if (!c.weighted) return {{"y"}, {random_doubles(p * c.d, 1)}, forward, backward};
  return {{"y", "weight"}, {random_doubles(p * c.d, 1), random_doubles(p, 2)}, forward, backward};
}

// Size 1, odd sizes, K = 8, a token count past the kernel's blocks, no tokens.
const Case kShapes[] = {{1, 1, 1}, {7, 9, 2}, {9, 6, 3}, {33, 19, 8}, {300, 40, 4}, {0, 5, 2}};

std::vector<Case> cases(const std::vector<Case>& shapes) {
  std::vector<Case> all;
  for (const Case& c : shapes) {
    for (bool weighted : {false, true}) all.push_back({c.n, c.d, c.top_k, weighted});
  }
  return all;
}

// Unweighted, the weights (and y in backward) are undefined: the MoE block's form.
struct Inputs {
  Tensor y, weight, row_of_pair, dout;
};
Inputs inputs(const Case& c) {
  return {random_f32({c.n * c.top_k, c.d}, 11), c.weighted ? random_f32({c.n, c.top_k}, 12) : Tensor{},
          make_row_of_pair(c), random_f32({c.n, c.d}, 13)};
}

OpTest<MoeCombineImpl, Case> moe_combine_test() {
  return {
      .table = &moe_combine_table(),
      .cases = cases({std::begin(kShapes), std::end(kShapes)}),
      .name = name,
      .supports = [](const MoeCombineImpl& impl, const Case& c) {
        const Inputs in = inputs(c);
        return impl.supports(in.weight, in.row_of_pair);
      },
      .forward = [](const MoeCombineImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor out = garbage({c.n, c.d});
        impl.forward(in.y, in.weight, in.row_of_pair, out);
        return {{"out", out}};
      },
      .backward = [](const MoeCombineImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor dy = garbage(in.y.shape()), dweight = c.weighted ? garbage({c.n, c.top_k}) : Tensor{};
        impl.backward(in.dout, c.weighted ? in.y : Tensor{}, in.weight, in.row_of_pair, dy, dweight);
        if (!c.weighted) return {{"dy", dy}};
        return {{"dy", dy}, {"dweight", dweight}};
      },
      .reference = moe_combine_reference,
      .fd_cases = cases({{3, 4, 2}, {4, 3, 3}}),
  };
}

TEST(MoeCombine, ReferenceBackwardMatchesFiniteDifferences) { sweep(moe_combine_test(), {Mode::gradient}); }

TEST(MoeCombine, KernelsMatchReference) { sweep(moe_combine_test(), {Mode::forward, Mode::backward}); }

TEST(MoeCombine, RejectsBadArguments) {
  const Case c{4, 6, 2};
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
