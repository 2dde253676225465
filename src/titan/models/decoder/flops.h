// Training FLOPs per token as torchtitan counts them (and as tools/bench_torch_qwen3.py does, so
// our MFU and the PyTorch peer's are comparable):
//   6 * N_matmul + 12 * L * H * K * T
// N_matmul: parameters that take part in a matmul per token — q/k/v/o, gate/up/down in every
// layer and the output head V*D (counted even when tied to the embedding, since the matmul runs);
// the embedding lookup, norms and biases are excluded. A mixture-of-experts layer counts its router
// (E*D) and the top_k experts a token is routed to, not all E (active parameters, as torchtitan). The attention term counts the full T x T
// score and value products (not halved for the causal mask), forward + backward.
// Qwen3.5: only its full-attention layers have the T x T term (their q projection counts the output
// gate's half too); a gated-DeltaNet layer counts its projections (in_proj_qkv / _z / _b / _a,
// out_proj) as matmuls, and the delta rule as 24 Dk Dv per value head per token (the recurrence's
// four Dk x Dv passes per token, decay, read, write and output, as multiply-adds, forward +
// backward at 3x), independent of T.
#pragma once

#include "titan/nn/decoder.h"

namespace titan::models {

int64_t matmul_params(const nn::DecoderConfig& config);
double train_flops_per_token(const nn::DecoderConfig& config, int64_t seq_len);
// The delta rule's part of train_flops_per_token (every gated-DeltaNet layer's); 0 without them.
double delta_rule_flops_per_token(const nn::DecoderConfig& config);

}  // namespace titan::models
