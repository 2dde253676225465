// The gated delta rule: the chunked CPU kernel against the sequential fp64 reference (sequences
// shorter than, equal to, and not a multiple of the chunk; grouped value heads; 1 and 2 threads),
// the reference backward against finite differences, the recurrent state carried across calls,
// and values from math.
#include "titan/ops/gated_delta/gated_delta.h"

#include <cmath>

#include "ops/op_harness.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

struct Case {
  int64_t batch, tokens, k_heads, k_dim, v_heads, v_dim, chunk;
};

GatedDeltaArgs args_of(const Case& c) { return {c.k_heads, c.k_dim, c.v_heads, c.v_dim, 1e-6f, c.chunk}; }
int64_t width(const Case& c) { return 2 * c.k_heads * c.k_dim + c.v_heads * c.v_dim; }

std::vector<Case> cases() {
  return {
      {1, 1, 1, 4, 1, 4, 64},    {1, 7, 1, 8, 1, 8, 64},     {2, 16, 2, 8, 4, 8, 16},   // T = chunk, grouped heads
      {1, 37, 1, 16, 2, 8, 16},  {2, 33, 2, 16, 2, 16, 8},   {1, 100, 2, 32, 4, 16, 64}, // T not a multiple
      {1, 100, 2, 32, 4, 16, 7}, {1, 64, 1, 128, 1, 128, 64},                            // a real head size
  };
}

std::string name(const Case& c) {
  return str("B=", c.batch, " T=", c.tokens, " k=", c.k_heads, "x", c.k_dim, " v=", c.v_heads, "x", c.v_dim,
             " chunk=", c.chunk);
}

// g = -|n| / 2 (a decay, as Qwen3.5's gates give), beta in (0, 1).
struct Inputs {
  Tensor qkv, g, beta, d_o;
};
Inputs inputs(const Case& c) {
  const Shape gates{c.batch, c.tokens, c.v_heads};
  Tensor g = random_f32(gates, 22), beta = random_f32(gates, 23);
  for (int64_t i = 0; i < g.numel(); ++i) {
    g.data<float>()[i] = -0.5f * std::fabs(g.data<float>()[i]);
    beta.data<float>()[i] = 1.0f / (1.0f + std::exp(-beta.data<float>()[i]));
  }
  return {random_f32({c.batch, c.tokens, width(c)}, 21), g, beta,
          random_f32({c.batch, c.tokens, c.v_heads * c.v_dim}, 24)};
}

RefFunction reference(const Case& c) {
  const GatedDeltaArgs a = args_of(c);
  const int64_t nq = c.batch * c.tokens * width(c), ng = c.batch * c.tokens * c.v_heads;
  const int64_t no = c.batch * c.tokens * c.v_heads * c.v_dim;
  auto forward = [=](const std::vector<Doubles>& in) {
    Doubles o(no);
    ref::gated_delta_forward(a, c.batch, c.tokens, in[0].data(), in[1].data(), in[2].data(), o.data(),
                             static_cast<double*>(nullptr));
    return o;
  };
  auto backward = [=](const std::vector<Doubles>& in, const Doubles& dy) {
    Doubles dqkv(nq), dg(ng), dbeta(ng);
    ref::gated_delta_backward(a, c.batch, c.tokens, dy.data(), in[0].data(), in[1].data(), in[2].data(),
                              dqkv.data(), dg.data(), dbeta.data());
    return std::vector<Doubles>{dqkv, dg, dbeta};
  };
  Doubles g = random_doubles(ng, 2), beta = random_doubles(ng, 3);
  for (double& x : g) x = -0.5 * std::fabs(x);
  for (double& x : beta) x = 1.0 / (1.0 + std::exp(-x));
  return {{"qkv", "g", "beta"}, {random_doubles(nq, 1), g, beta}, forward, backward};
}

OpTest<GatedDeltaImpl, Case> gated_delta_test() {
  return {
      .table = &gated_delta_table(),
      .cases = cases(),
      .name = name,
      .forward = [](const GatedDeltaImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor o = garbage({c.batch, c.tokens, c.v_heads * c.v_dim}), none;
        impl.forward(args_of(c), in.qkv, in.g, in.beta, o, none);
        return {{"o", o}};
      },
      .backward = [](const GatedDeltaImpl& impl, const Case& c) -> Outputs {
        const Inputs in = inputs(c);
        Tensor dqkv = garbage(in.qkv.shape()), dg = garbage(in.g.shape()), dbeta = garbage(in.beta.shape());
        impl.backward(args_of(c), in.d_o, in.qkv, in.g, in.beta, dqkv, dg, dbeta);
        return {{"dqkv", dqkv}, {"dg", dg}, {"dbeta", dbeta}};
      },
      .threads = {1, 2},
      .reference = reference,
      // Small enough for O(size^2) differences: two tokens past a group of two value heads, and a
      // longer single head.
      .fd_cases = {{1, 3, 1, 3, 2, 2, 64}, {2, 6, 1, 2, 1, 3, 64}},
  };
}

TEST(GatedDelta, ReferenceBackwardMatchesFiniteDifferences) { sweep(gated_delta_test(), {Mode::gradient}); }

TEST(GatedDelta, KernelsMatchReference) { sweep(gated_delta_test(), {Mode::forward, Mode::backward, Mode::isa_levels}); }

// The CPU kernel gives the same bits on every call at any thread count: tasks run on whichever
// thread takes them, and their scratch is aligned so that no result depends on that thread's heap
// (core/aligned_vector.h). (Before, 1 run in 20 of a 2-thread backward differed in the last bit.)
TEST(GatedDelta, EveryCallGivesTheSameBits) {
  const Case c{2, 16, 2, 8, 4, 8, 64};
  const Inputs in = inputs(c);
  const GatedDeltaImpl& impl = gated_delta_table().impls().back();
  const ThreadCount threads(2);
  Tensor first_o, first_d;
  for (int run = 0; run < 100; ++run) {
    Tensor o = Tensor::empty({c.batch, c.tokens, c.v_heads * c.v_dim}), none;
    Tensor dqkv = Tensor::empty(in.qkv.shape()), dg = Tensor::empty(in.g.shape()), dbeta = Tensor::empty(in.g.shape());
    impl.forward(args_of(c), in.qkv, in.g, in.beta, o, none);
    impl.backward(args_of(c), in.d_o, in.qkv, in.g, in.beta, dqkv, dg, dbeta);
    if (run == 0) {
      first_o = o;
      first_d = dqkv;
      continue;
    }
    ASSERT_TRUE(all_close("o", o, first_o, kExact)) << "run " << run;
    ASSERT_TRUE(all_close("dqkv", dqkv, first_d, kExact)) << "run " << run;
  }
}

// The state handed from one call to the next (generation: a prompt, then a token at a time)
// gives the outputs of one call over the whole sequence, in every implementation.
TEST(GatedDelta, StateCarriesAcrossCalls) {
  const Case c{2, 21, 1, 8, 2, 8, 4};
  const GatedDeltaArgs a = args_of(c);
  const Inputs in = inputs(c);
  for (const GatedDeltaImpl& impl : gated_delta_table().impls()) {
    Tensor whole = Tensor::empty({c.batch, c.tokens, c.v_heads * c.v_dim}), none;
    impl.forward(a, in.qkv, in.g, in.beta, whole, none);
    Tensor state = Tensor::zeros({c.batch, c.v_heads, c.k_dim, c.v_dim});
    std::vector<double> pieces(static_cast<size_t>(whole.numel()));
    for (const auto& [t0, n] : {std::pair<int64_t, int64_t>{0, 13}, {13, 1}, {14, 7}}) {
      const auto slice = [&](const Tensor& t) { return t.narrow(1, t0, n).contiguous(); };
      Tensor o = Tensor::empty({c.batch, n, c.v_heads * c.v_dim});
      impl.forward(a, slice(in.qkv), slice(in.g), slice(in.beta), o, state);
      for (int64_t b = 0; b < c.batch; ++b) {
        for (int64_t i = 0; i < n * c.v_heads * c.v_dim; ++i) {
          pieces[static_cast<size_t>((b * c.tokens + t0) * c.v_heads * c.v_dim + i)] =
              o.data<float>()[b * n * c.v_heads * c.v_dim + i];
        }
      }
    }
    EXPECT_TRUE(all_close(impl.name + " pieces vs whole", pieces, to_doubles(whole), kF32Tol));
  }
}

// One token from S_0 = 0 with beta = 1: S_1 = kh v^T, so o = (qh . kh) v; with q = k that is
// v / sqrt(Dk) (qh . kh = |k|^2 / (|k|^2 + eps) / sqrt(Dk)). g does not matter for the first token.
TEST(GatedDelta, OneTokenIsItsValueScaledByTheQueryKeyCosine) {
  const GatedDeltaArgs a{1, 4, 1, 3};
  const Tensor qkv = from_doubles({1, 2, 2, 4, 1, 2, 2, 4, 0.5, -1, 3}, {1, 1, 11});
  const Tensor g = from_doubles({-0.7}, {1, 1, 1}), beta = from_doubles({1.0}, {1, 1, 1});
  Tensor o = Tensor::empty({1, 1, 3}), none;
  gated_delta_forward(a, qkv, g, beta, o, none);
  const double cosine = 25.0 / (25.0 + 1e-6) / 2.0;
  EXPECT_TRUE(all_close("o", to_doubles(o), {0.5 * cosine, -cosine, 3 * cosine}, kF32Tol));
}

TEST(GatedDelta, BadShapesAreOneLineErrors) {
  const Tensor qkv = Tensor::zeros({1, 4, 10}), g = Tensor::zeros({1, 4, 2});
  Tensor o = Tensor::empty({1, 4, 4}), none;
  EXPECT_NE(error_of([&] { gated_delta_forward({1, 3, 2, 3}, qkv, g, g, o, none); })
                .find("[gated_delta] qkv: expected a contiguous f32 [B, T, 12] tensor"),
            std::string::npos);
  EXPECT_NE(error_of([&] { gated_delta_forward({2, 2, 3, 2}, qkv, g, g, o, none); })
                .find("linear_num_value_heads must be a multiple of linear_num_key_heads"),
            std::string::npos);
  const Tensor g3 = Tensor::zeros({1, 4, 3});
  EXPECT_NE(error_of([&] { gated_delta_forward({1, 2, 2, 3}, qkv, g3, g, o, none); }).find("[gated_delta] g:"),
            std::string::npos);
}

}  // namespace
}  // namespace titan::ops
