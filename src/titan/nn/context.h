// What every module's forward/backward of one micro-batch shares: the batch geometry, the RoPE
// tables computed once from the explicit positions, who computes attention over the sequence,
// and the gradient the HF aux loss sends into every MoE layer's router (the same for all of them).
#pragma once

#include <vector>

#include "titan/core/tensor.h"
#include "titan/ops/rope/rope.h"

namespace titan::nn {

class SequenceAttention;

struct StepContext {
  int64_t batch = 0;        // B
  int64_t seq = 0;          // T
  Tensor positions_N;       // i64 [B*T]: the micro-batch's positions (0..T-1 per row unless given)
  ops::RopeTables rope;     // cos/sin [B*T, head_dim/2]
  // Generation with left padding: i32 [B*T], 1 on padding slots (ops/positions' padding_mask);
  // undefined in training. Recurrent layers zero those rows of their input.
  Tensor padding_N;
  // Attention over more than the micro-batch's tokens (nn/sequence_attention.h; not owned); null:
  // the tokens are the whole sequence.
  SequenceAttention* sequence = nullptr;
  // d aux / d router prob, per expert, scaled (set by the decoder after the head, before the
  // blocks' backward; empty without aux-loss balancing).
  std::vector<double> moe_aux_dprobs_E;
};

}  // namespace titan::nn
