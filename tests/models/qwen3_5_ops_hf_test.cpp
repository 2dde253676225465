// Qwen3.5's linear-attention ops against Transformers' own implementations
// (tools/make_qwen3_5_op_fixtures.py: torch_chunk_gated_delta_rule and causal_conv1d_fn with
// torch.autograd's gradients), for every implementation in each op's table and, for the delta
// rule, chunks of 64 (Transformers' own) and 16 (the chunk is a kernel choice).
#include <gtest/gtest.h>

#include "ops/op_harness.h"
#include "titan/checkpoint/safetensors.h"
#include "titan/ops/causal_conv1d/causal_conv1d.h"
#include "titan/ops/gated_delta/gated_delta.h"

namespace titan::ops {
namespace {

using namespace titan::testing;

// Transformers runs the chunked form in f32 too: different sums, the same rounding scale.
constexpr Tolerance kHfTol{1e-5, 1e-4};

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

}  // namespace
}  // namespace titan::ops
