// Qwen3.5's linear attention against Transformers' own implementations
// (tools/make_qwen3_5_op_fixtures.py, with torch.autograd's gradients): the ops
// (torch_chunk_gated_delta_rule, causal_conv1d_fn) for every implementation in each op's table
// and, for the delta rule, chunks of 64 (Transformers' own) and 16 (the chunk is a kernel
// choice); and the whole nn::GatedDeltaNet module against Qwen3_5GatedDeltaNet.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ops/op_harness.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/nn/gated_delta_net.h"
#include "titan/ops/causal_conv1d/causal_conv1d.h"
#include "titan/ops/gated_delta/gated_delta.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

// Transformers runs the chunked form in f32 too: different sums, the same rounding scale.
constexpr Tolerance kHfTol{1e-5, 1e-4};

// For whole-layer gradients, which sum over many tokens: the absolute part scales with the
// tensor's largest value (f32 rounding of sums of that size), the relative part as above.
Tolerance layer_tol(const Tensor& want) {
  double peak = 0.0;
  for (const double v : to_doubles(want)) peak = std::max(peak, std::fabs(v));
  return {1e-5 + 3e-6 * peak, 1e-4};
}

ckpt::SafetensorsFile fixture(const std::string& name) {
  return ckpt::SafetensorsFile::open(source_path("tests/fixtures/qwen3_5_ops/" + name));
}

TEST(Qwen3_5Ops, GatedDeltaEqualsTransformers) {
  const ckpt::SafetensorsFile f = fixture("gated_delta.safetensors");
  const Tensor qkv = f.get("qkv").contiguous(), g = f.get("g").contiguous(), beta = f.get("beta").contiguous();
  const Tensor d_o = f.get("do").contiguous();
  for (const int64_t chunk : {64, 16}) {
    const GatedDeltaArgs args{2, 16, 4, 8, 1e-6f, chunk};
    for (const GatedDeltaImpl& impl : gated_delta_table().impls()) {
      const std::string where = str(impl.name, " chunk ", chunk);
      Tensor o = Tensor::empty(f.get("o").shape()), none;
      impl.forward(args, qkv, g, beta, o, none);
      EXPECT_TRUE(all_close(where + " o", o, f.get("o").contiguous(), kHfTol));
      Tensor dqkv = Tensor::empty(qkv.shape()), dg = Tensor::empty(g.shape()), dbeta = Tensor::empty(beta.shape());
      impl.backward(args, d_o, qkv, g, beta, dqkv, dg, dbeta);
      EXPECT_TRUE(all_close(where + " dqkv", dqkv, f.get("dqkv").contiguous(), kHfTol));
      EXPECT_TRUE(all_close(where + " dg", dg, f.get("dg").contiguous(), kHfTol));
      EXPECT_TRUE(all_close(where + " dbeta", dbeta, f.get("dbeta").contiguous(), kHfTol));
    }
  }
}

TEST(Qwen3_5Ops, CausalConv1dEqualsTransformers) {
  const ckpt::SafetensorsFile f = fixture("causal_conv1d.safetensors");
  const Tensor x = f.get("x").contiguous(), w = f.get("weight").contiguous(), dy = f.get("dy").contiguous();
  for (const CausalConv1dImpl& impl : causal_conv1d_table().impls()) {
    Tensor y = Tensor::empty(x.shape()), none;
    impl.forward({true}, x, w, y, none);
    EXPECT_TRUE(all_close(impl.name + " y", y, f.get("y").contiguous(), kHfTol));
    Tensor dx = Tensor::empty(x.shape()), dw = Tensor::zeros(w.shape());
    impl.backward({true}, dy, x, w, dx, dw);
    EXPECT_TRUE(all_close(impl.name + " dx", dx, f.get("dx").contiguous(), kHfTol));
    EXPECT_TRUE(all_close(impl.name + " dweight", dw, f.get("dweight").contiguous(), kHfTol));
  }
}

// One Qwen3_5GatedDeltaNet layer: output, input gradient and every weight's gradient.
TEST(Qwen3_5Ops, GatedDeltaNetEqualsTransformers) {
  const ckpt::SafetensorsFile f = fixture("gated_delta_net.safetensors");
  nn::GatedDeltaNetConfig config;
  config.dim = 32;
  config.k_heads = 2;
  config.k_dim = 16;
  config.v_heads = 4;
  config.v_dim = 8;
  nn::ConfigTree tree;
  nn::add_gated_delta_net_nodes(tree, "model.layers.0.attention", config);
  const nn::ModuleBuild build(nn::module_registry(), tree, "model.layers.0.attention");
  nn::GatedDeltaNet layer(config, build);
  nn::ParameterList params;
  layer.collect(params);
  ASSERT_EQ(params.size(), 9u);
  const std::string prefix = "layers.0.attention.";
  for (nn::Parameter* p : params) {
    ASSERT_EQ(p->fqn.rfind(prefix, 0), 0u) << p->fqn;
    const Tensor hf = f.get(p->fqn.substr(prefix.size())).contiguous();
    ASSERT_EQ(hf.numel(), p->value.numel()) << p->fqn;  // conv1d.weight: HF [C, 1, K], titan [C, K]
    p->value.copy_from(hf.reshape(p->value.shape()));
    p->grad.zero_();
  }
  nn::StepContext ctx;
  ctx.batch = 2;
  ctx.seq = 70;
  const Tensor x = f.get("x").contiguous().reshape({140, 32});
  std::any saved;
  const Tensor y = layer.forward(ctx, x, saved);
  const Tensor y_want = f.get("y").contiguous().reshape({140, 32});
  EXPECT_TRUE(all_close("y", y, y_want, layer_tol(y_want)));
  const Tensor dx = layer.backward(ctx, f.get("dy").contiguous().reshape({140, 32}), saved);
  const Tensor dx_want = f.get("dx").contiguous().reshape({140, 32});
  EXPECT_TRUE(all_close("dx", dx, dx_want, layer_tol(dx_want)));
  for (nn::Parameter* p : params) {
    const Tensor want = f.get("grad." + p->fqn.substr(prefix.size())).contiguous().reshape(p->grad.shape());
    EXPECT_TRUE(all_close("grad " + p->fqn, p->grad, want, layer_tol(want)));
  }
}

}  // namespace
}  // namespace titan::ops
