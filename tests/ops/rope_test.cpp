// RoPE: case list for the shared harness, values from math (Python's math module), in-place use,
// and the shape errors.
#include "titan/ops/rope/rope.h"

#include <cmath>
#include <numbers>

#include "titan/core/rng.h"
#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  Shape x;            // [N, H, L] or [B, T, H, L]
  int64_t rotary = 0;  // K, the rotated lanes of each head (partial rotary); 0: all L
};
// K/2 below, at and past the 16-lane vector (K/2 = 1, 3, 17, 32, 64, 128), one and many heads;
// the last two have enough rows to be split over threads; then partial rotary (Qwen3.5: a
// quarter of head_dim 256), the pass-through lanes not a multiple of the vector.
const Case kCases[] = {{{1, 1, 2}},      {{3, 2, 6}},      {{5, 3, 34}},      {{4, 2, 64}},
                       {{7, 4, 128}},    {{2, 3, 256}},    {{2, 3, 2, 128}},  {{4, 64, 2, 16}},
                       {{200, 8, 64}},   {{3, 2, 8}, 2},   {{5, 3, 40}, 34},  {{2, 3, 2, 256}, 64},
                       {{40, 4, 256}, 64}};

int64_t rotary(const Case& c) { return c.rotary > 0 ? c.rotary : c.x.back(); }
std::string name(const Case& c) { return "x=" + shape_str(c.x) + (c.rotary > 0 ? str(" rotary=", c.rotary) : ""); }
int64_t rows(const Case& c) { return shape_numel(c.x) / (c.x.end()[-2] * c.x.back()); }

// Positions up to 40000: large angles exercise the double-precision angle.
Tensor random_positions(int64_t n, uint64_t seed) {
  Tensor p = Tensor::empty({n}, DType::i64);
  Rng(seed).fill_int(p.data<int64_t>(), n, 40000);
  return p;
}

Tensor positions(const std::vector<int64_t>& values) {
  Tensor p = Tensor::empty({static_cast<int64_t>(values.size())}, DType::i64);
  for (size_t i = 0; i < values.size(); ++i) p.data<int64_t>()[i] = values[i];
  return p;
}

struct Inputs {
  RopeTables tables;
  Tensor x, dy;
};
Inputs inputs(const Case& c) {
  return {rope_tables({}, random_positions(rows(c), 10), rotary(c)), random_f32(c.x, 11), random_f32(c.x, 12)};
}

RefFunction rope_reference(const Case& c) {
  const int64_t n = rows(c), h = c.x.end()[-2], k = rotary(c), lanes = c.x.back();
  const Tensor pos = random_positions(n, 1);
  Doubles cos(n * k / 2), sin(n * k / 2);
  ref::rope_tables(1e6, n, k, pos.data<int64_t>(), cos.data(), sin.data());
  // The differentiable input: x (the tables are constants).
  auto forward = [=](const std::vector<Doubles>& in) {
    Doubles y(in[0].size());
    ref::rope_forward(n, h, k, cos.data(), sin.data(), in[0].data(), y.data(), lanes);
    return y;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    Doubles dx(in[0].size());
    ref::rope_backward(n, h, k, cos.data(), sin.data(), dy.data(), dx.data(), lanes);
    return std::vector<Doubles>{dx};
  };
  return {{"x"}, {random_doubles(shape_numel(c.x), 2)}, forward, backward};
}

// y may alias x and dx may alias dy: each implementation's in-place result must be the bits of
// its out-of-place one, and both are compared with the reference's.
OpTest<RopeImpl, Case> rope_test() {
  return {
      .table = &rope_table(),
      .cases = {std::begin(kCases), std::end(kCases)},
      .name = name,
      .supports = [](const RopeImpl& impl, const Case& c) {
        const Inputs in = inputs(c);
        return impl.supports(in.tables, in.x);
      },
      .forward = [](const RopeImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor y = garbage(c.x), y_inplace = in.x.clone();
        impl.forward(in.tables, in.x, y);
        impl.forward(in.tables, y_inplace, y_inplace);
        EXPECT_TRUE(all_close(impl.name + " " + name(c) + " y in place vs out of place", y_inplace, y, kExact));
        return {{"y", y}, {"y in place", y_inplace}};
      },
      .backward = [](const RopeImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor dx = garbage(c.x), dx_inplace = in.dy.clone();
        impl.backward(in.tables, in.dy, dx);
        impl.backward(in.tables, dx_inplace, dx_inplace);
        EXPECT_TRUE(all_close(impl.name + " " + name(c) + " dx in place vs out of place", dx_inplace, dx, kExact));
        return {{"dx", dx}, {"dx in place", dx_inplace}};
      },
      .reference = rope_reference,
      .fd = {.max_elements = 1000},
  };
}

TEST(Rope, ReferenceBackwardMatchesFiniteDifferences) { sweep(rope_test(), {Mode::gradient}); }

TEST(Rope, KernelsMatchReferenceOutOfPlaceAndInPlace) { sweep(rope_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

// rope_tables splits rows over threads; each row must match the single-threaded reference.
TEST(Rope, TablesMatchReference) {
  const int64_t n = 300, k = 128;
  const Tensor pos = random_positions(n, 7);
  const RopeTables t = rope_tables({}, pos, k);
  Tensor cos = Tensor::empty({n, k / 2}), sin = Tensor::empty({n, k / 2});
  ref::rope_tables(1e6, n, k, pos.data<int64_t>(), cos.data<float>(), sin.data<float>());
  EXPECT_TRUE(all_close("rope_tables cos", t.cos_NK2, cos, {0, 0}));
  EXPECT_TRUE(all_close("rope_tables sin", t.sin_NK2, sin, {0, 0}));
  EXPECT_EQ(t.head_dim, k);
}

// Tables against Python: inv_freq = 1e6^(-2i/8) = 1, 1e6^-0.25, 1e-3, 1e6^-0.75 at position 3,
// and a large position where an f32 angle (HF's) would be off by ~4e-6 in cos.
TEST(Rope, TablesMatchHandComputedValues) {
  const Tolerance f32_rounding{1e-7, 1e-7};
  RopeTables t = rope_tables({1e6f, {}}, positions({3}), 8);
  EXPECT_TRUE(all_close("cos p=3", to_doubles(t.cos_NK2),
                        {-0.9899924966004454, 0.9955033739876628, 0.999995500003375, 0.9999999955}, f32_rounding));
  EXPECT_TRUE(all_close("sin p=3", to_doubles(t.sin_NK2),
                        {0.1411200080598672, 0.0947260913327461, 0.002999995500002025, 9.48683296627489e-05},
                        f32_rounding));
  t = rope_tables({1e4f, {}}, positions({123457}), 4);  // inv_freq = 1, 0.01
  EXPECT_TRUE(all_close("cos p=123457", to_doubles(t.cos_NK2), {0.259684572196596, -0.99712000224394}, f32_rounding));
  EXPECT_TRUE(all_close("sin p=123457", to_doubles(t.sin_NK2), {-0.9656934932798662, 0.07583997049739058},
                        f32_rounding));
}

// K = 4, theta = 1e4, position 1: angles 1 and 0.01; x = [1, 2, 3, 4] gives
// y = [1 cos1 - 3 sin1, 2 cos.01 - 4 sin.01, 3 cos1 + 1 sin1, 4 cos.01 + 2 sin.01].
TEST(Rope, ForwardMatchesHandComputedValues) {
  const RopeTables t = rope_tables({1e4f, {}}, positions({1}), 4);
  const Tensor x = from_doubles({1, 2, 3, 4}, {1, 1, 4});
  Tensor y = Tensor::empty({1, 1, 4});
  rope_forward(t, x, y);
  EXPECT_TRUE(all_close("rope y", to_doubles(y),
                        {-1.9841106485555495, 1.959900667496664, 2.4623779024123156, 4.019799668334994},
                        {1e-6, 1e-6}));
}

TEST(Rope, PositionZeroIsIdentity) {
  const RopeTables t = rope_tables({}, positions({0, 0, 0}), 40);
  const Tensor x = random_f32({3, 2, 40}, 5);
  for (const RopeImpl& impl : rope_table().impls()) {
    Tensor y = Tensor::empty(x.shape()), dx = Tensor::empty(x.shape());
    impl.forward(t, x, y);
    impl.backward(t, x, dx);
    EXPECT_TRUE(all_close(impl.name + " y at position 0", y, x, {0, 0}));
    EXPECT_TRUE(all_close(impl.name + " dx at position 0", dx, x, {0, 0}));
  }
}

// A rotation keeps |(x[i], x[i + K/2])| for every pair, and its transpose (the backward) undoes
// it, as does the forward at the negated position.
TEST(Rope, RotationPreservesPairNormsAndInverts) {
  const int64_t n = 4, h = 3, k = 36, k2 = k / 2;
  const std::vector<int64_t> p = {1, 17, 4096, 39999};
  std::vector<int64_t> minus_p;
  for (int64_t v : p) minus_p.push_back(-v);
  const RopeTables t = rope_tables({}, positions(p), k), t_neg = rope_tables({}, positions(minus_p), k);
  const Tensor x = random_f32({n, h, k}, 6);
  Tensor y = Tensor::empty(x.shape());
  rope_forward(t, x, y);
  const auto xs = to_doubles(x), ys = to_doubles(y);
  std::vector<double> norm_x, norm_y;
  for (int64_t row = 0; row < n * h; ++row) {
    for (int64_t i = 0; i < k2; ++i) {
      const int64_t a = row * k + i, b = a + k2;
      norm_x.push_back(std::hypot(xs[a], xs[b]));
      norm_y.push_back(std::hypot(ys[a], ys[b]));
    }
  }
  EXPECT_TRUE(all_close("pair norms", norm_y, norm_x, {1e-6, 1e-6}));

  Tensor back = Tensor::empty(x.shape()), undo = Tensor::empty(x.shape());
  rope_backward(t, y, back);
  rope_forward(t_neg, y, undo);
  EXPECT_TRUE(all_close("backward(forward(x))", back, x, {1e-6, 1e-6}));
  EXPECT_TRUE(all_close("forward(-p, forward(p, x))", undo, x, {1e-6, 1e-6}));
}

using testing::error_of;

TEST(Rope, RejectsBadShapes) {
  std::string msg = error_of([] { rope_tables({}, positions({0, 1}), 7); });
  EXPECT_NE(msg.find("[rope] head_dim: expected a positive even number, got 7"), std::string::npos) << msg;

  const RopeTables t = rope_tables({}, positions({0, 1, 2, 3}), 8);
  Tensor x = random_f32({4, 3, 6}, 1), y = Tensor::empty({4, 3, 6});
  msg = error_of([&] { rope_forward(t, x, y); });
  EXPECT_NE(msg.find("[rope] x: expected a contiguous f32 [..., H, K] tensor (ndim >= 3, K >= the rotated head_dim 8)"),
            std::string::npos)
      << msg;

  x = random_f32({4, 8}, 1);  // no heads dim
  y = Tensor::empty({4, 8});
  msg = error_of([&] { rope_forward(t, x, y); });
  EXPECT_NE(msg.find("got f32[4, 8]"), std::string::npos) << msg;

  x = random_f32({2, 3, 2, 8}, 1);  // 6 rows, tables for 4 positions
  y = Tensor::empty({2, 3, 2, 8});
  msg = error_of([&] { rope_backward(t, x, y); });
  EXPECT_NE(msg.find("[rope] x: f32[2, 3, 2, 8] has 6 rows of 2 heads x 8 lanes, but the tables have 4 rows"),
            std::string::npos)
      << msg;

  x = random_f32({4, 1, 8}, 1);
  y = Tensor::empty({4, 8});
  msg = error_of([&] { rope_forward(t, x, y); });
  EXPECT_NE(msg.find("[rope] y: expected contiguous f32[4, 1, 8], got f32[4, 8]"), std::string::npos) << msg;
}

// Scaled frequencies against the formulas worked by hand for theta 1e4, head_dim 8 (base
// inv_freq 1, 0.1, 0.01, 0.001) and an original context of 16 positions.
TEST(RopeScaling, FrequenciesFromTheFormulas) {
  const std::vector<double> base = {1.0, 0.1, 0.01, 0.001};
  auto expect = [](const RopeFrequencies& f, const std::vector<double>& inv, double attention, const char* what) {
    ASSERT_EQ(f.inv_freq.size(), inv.size()) << what;
    for (size_t i = 0; i < inv.size(); ++i) EXPECT_NEAR(f.inv_freq[i], inv[i], 1e-12 * inv[i] + 1e-15) << what << " " << i;
    EXPECT_NEAR(f.attention_factor, attention, 1e-12) << what;
  };
  RopeScaling s;
  s.max_position_embeddings = 16;
  s.original_max_position_embeddings = 16;
  s.type = RopeType::linear;
  s.factor = 2.0;
  expect(rope_frequencies(1e4, 8, s, 64), {0.5, 0.05, 0.005, 0.0005}, 1.0, "linear");
  // dynamic: theta' = theta * (factor * L / M - (factor - 1))^(K / (K - 2)), L = max(seq_len, M)
  s.type = RopeType::dynamic;
  const double theta2 = 1e4 * std::pow(2.0 * 32 / 16 - 1.0, 8.0 / 6.0);
  expect(rope_frequencies(1e4, 8, s, 32), {1.0, std::pow(theta2, -0.25), std::pow(theta2, -0.5), std::pow(theta2, -0.75)},
         1.0, "dynamic, 32 positions");
  expect(rope_frequencies(1e4, 8, s, 8), base, 1.0, "dynamic, within the context");
  // yarn, factor 4: correction range [floor(-1.10), ceil(0.41)] = [0, 1]: lane 0 kept, the rest / 4;
  // attention factor 0.1 ln 4 + 1.
  s.type = RopeType::yarn;
  s.factor = 4.0;
  expect(rope_frequencies(1e4, 8, s, 64), {1.0, 0.025, 0.0025, 0.00025}, 0.1 * std::log(4.0) + 1.0, "yarn");
  s.mscale = 1.0;
  s.mscale_all_dim = 0.5;  // DeepSeek: (0.1 ln 4 + 1) / (0.05 ln 4 + 1)
  expect(rope_frequencies(1e4, 8, s, 64), {1.0, 0.025, 0.0025, 0.00025},
         (0.1 * std::log(4.0) + 1.0) / (0.05 * std::log(4.0) + 1.0), "yarn mscale");
  // llama3, factor 8, low 1, high 4: wavelengths 2 pi (medium: between 16/4 and 16/1), 20 pi ... (low)
  s = RopeScaling{};
  s.type = RopeType::llama3;
  s.factor = 8.0;
  s.original_max_position_embeddings = 16;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  const double smooth = (16.0 / (2 * std::numbers::pi) - 1.0) / 3.0;
  expect(rope_frequencies(1e4, 8, s, 64), {(1 - smooth) / 8 + smooth, 0.1 / 8, 0.01 / 8, 0.001 / 8}, 1.0, "llama3");
  // longrope, factor 4: attention sqrt(1 + ln 4 / ln 16); long factors past 16 positions
  s = RopeScaling{};
  s.type = RopeType::longrope;
  s.factor = 4.0;
  s.max_position_embeddings = 64;
  s.original_max_position_embeddings = 16;
  s.long_factor = {1, 2, 4, 8};
  s.short_factor = {1, 1, 2, 2};
  expect(rope_frequencies(1e4, 8, s, 17), {1.0, 0.05, 0.0025, 0.000125}, std::sqrt(1.5), "longrope long");
  expect(rope_frequencies(1e4, 8, s, 16), {1.0, 0.1, 0.005, 0.0005}, std::sqrt(1.5), "longrope short");
  // The tables carry the attention factor on cos and sin; the length is max(position) + 1.
  RopeArgs args{1e4f, {}};
  args.scaling.type = RopeType::yarn;
  args.scaling.factor = 4.0;
  args.scaling.original_max_position_embeddings = 16;
  const RopeTables t = rope_tables(args, positions({0, 5}), 8);
  EXPECT_FLOAT_EQ(t.cos_NK2.data<float>()[0], static_cast<float>(0.1 * std::log(4.0) + 1.0));
  EXPECT_FLOAT_EQ(t.sin_NK2.data<float>()[4 + 1], static_cast<float>((0.1 * std::log(4.0) + 1.0) * std::sin(5 * 0.025)));
}

}  // namespace
}  // namespace titan::ops
