// Causal depthwise 1-D convolution over the tokens, each channel on its own (Qwen3.5's
// linear-attention conv1d: groups = channels, padding K - 1, the first T outputs kept, no bias),
// with an optional SiLU after it (Transformers' causal_conv1d_fn with activation "silu"):
//   pre_t[c] = sum_{j < K} w[c, j] x_{t - (K - 1) + j}[c],   x_s = state_s for s < 0 (else 0)
//   y_t[c] = silu(pre_t[c])  (or pre_t[c] without `silu`)
// Shapes: B batch rows, T tokens, C channels, K taps.
//   x_BTC -> y_BTC (written =); weight_CK (HF's conv1d.weight [C, 1, K] without its 1).
//   state_BSC (forward only, optional): [B, K - 1, C], the K - 1 inputs before x (generation): read
//   as x_{-(K-1)} .. x_{-1}, then overwritten with the last K - 1 inputs of [state, x].
// Backward (state taken as 0): dx written (=), dweight accumulated (+=). Nothing is saved: the
// backward recomputes pre from x. Derivation: causal_conv1d.md.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct CausalConv1dArgs {
  bool silu = true;
};

// Throws naming the tensor and what it expected.
void check_causal_conv1d(const Tensor& x_BTC, const Tensor& weight_CK);

void causal_conv1d_forward(const CausalConv1dArgs& args, const Tensor& x_BTC, const Tensor& weight_CK, Tensor& y_BTC,
                           Tensor& state_BSC);
void causal_conv1d_backward(const CausalConv1dArgs& args, const Tensor& dy_BTC, const Tensor& x_BTC,
                            const Tensor& weight_CK, Tensor& dx_BTC, Tensor& dweight_CK);

using CausalConv1dImpl =
    OpImpl<bool (*)(const Tensor& x_BTC, const Tensor& weight_CK),
           void (*)(const CausalConv1dArgs&, const Tensor&, const Tensor&, Tensor&, Tensor&),
           void (*)(const CausalConv1dArgs&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&)>;
OpTable<CausalConv1dImpl>& causal_conv1d_table();
CausalConv1dImpl causal_conv1d_impl_ref();
CausalConv1dImpl causal_conv1d_impl_cpu();

namespace ref {
// Plain loops, math in double; float and double instances. `state` may be null.
template <class T>
void causal_conv1d_forward(bool silu, int64_t batch, int64_t tokens, int64_t channels, int64_t taps, const T* x,
                           const T* weight, T* y, T* state);
template <class T>
void causal_conv1d_backward(bool silu, int64_t batch, int64_t tokens, int64_t channels, int64_t taps, const T* dy,
                            const T* x, const T* weight, T* dx, T* dweight);
}  // namespace ref

}  // namespace titan::ops
