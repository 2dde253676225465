// The expert-bias balancing step (moe_bias_update): every implementation against the reference
// (the contract fixes the fp64 order, so exactly), values from math, and the one-line errors.
#include "titan/ops/moe_bias/moe_bias.h"

#include <string>
#include <vector>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct BiasCase {
  int64_t e;
  double rate;
  bool ties;  // every expert equally loaded: no change
};

Tensor load_of(const BiasCase& c) {
  Tensor load = Tensor::empty({c.e}, DType::i64);
  for (int64_t j = 0; j < c.e; ++j) load.data<int64_t>()[j] = c.ties ? 42 : (j * 7919 + 3) % 97;
  return load;
}

OpTest<MoeBiasUpdateImpl, BiasCase> bias_test() {
  return {
      .table = &moe_bias_update_table(),
      .cases = {{1, 1e-3, false}, {2, 1e-3, false}, {7, 0.01, false}, {8, 1e-3, true}, {64, 1e-3, false},
                {129, 0.3, false}},
      .name = [](const BiasCase& c) { return str("E=", c.e, " rate=", c.rate, c.ties ? " ties" : ""); },
      .forward = [](const MoeBiasUpdateImpl& impl, const BiasCase& c) -> Outputs {
        Tensor bias = random_f32({c.e}, 5, 0.1f);
        impl.forward(load_of(c), c.rate, bias);
        return {{"bias", bias, kExact}};
      },
  };
}

TEST(MoeBias, KernelsMatchReference) { sweep(bias_test(), {Mode::forward}); }

// Loads [1, 2, 6] (mean 3): deltas rate * [+1, +1, -1] with rate 0.5, mean 1/6; the bias from
// 0 becomes [1/3, 1/3, -2/3] (as f32 of the fp64 values). A tie (load == mean) moves by -mean only.
TEST(MoeBias, ValuesFromMath) {
  Tensor load = Tensor::empty({3}, DType::i64);
  load.data<int64_t>()[0] = 1, load.data<int64_t>()[1] = 2, load.data<int64_t>()[2] = 6;
  Tensor tie = Tensor::empty({3}, DType::i64);
  tie.data<int64_t>()[0] = 1, tie.data<int64_t>()[1] = 3, tie.data<int64_t>()[2] = 5;  // mean 3
  for (const MoeBiasUpdateImpl& impl : moe_bias_update_table().impls()) {
    Tensor bias = Tensor::zeros({3});
    impl.forward(load, 0.5, bias);
    EXPECT_EQ(to_doubles(bias), (Doubles{static_cast<float>(0.5 - 0.5 / 3), static_cast<float>(0.5 - 0.5 / 3),
                                         static_cast<float>(-0.5 - 0.5 / 3)}))
        << impl.name;
    Tensor bias2 = Tensor::zeros({3});
    impl.forward(tie, 0.5, bias2);  // deltas [+0.5, 0, -0.5], mean 0
    EXPECT_EQ(to_doubles(bias2), (Doubles{0.5, 0.0, -0.5})) << impl.name;
  }
  EXPECT_EQ(moe_bias_update_table().impls().back().name, "moe_bias_update_cpu");
}

TEST(MoeBias, ErrorsNameTheTensor) {
  Tensor bias = Tensor::zeros({4});
  EXPECT_NE(error_of([&] { moe_bias_update(Tensor::zeros({3}, DType::i64), 0.1, bias); }).find("[moe_bias] load_E"),
            std::string::npos);
  Tensor empty_bias = Tensor::zeros({0});
  EXPECT_NE(error_of([&] { moe_bias_update(Tensor::zeros({0}, DType::i64), 0.1, empty_bias); })
                .find("[moe_bias] bias_E"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
