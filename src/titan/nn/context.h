// What every module's forward/backward of one micro-batch shares: the batch geometry and the
// RoPE tables computed once from the explicit positions.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/rope/rope.h"

namespace titan::nn {

struct StepContext {
  int64_t batch = 0;        // B
  int64_t seq = 0;          // T
  Tensor positions_N;       // i64 [B*T]
  ops::RopeTables rope;     // cos/sin [B*T, head_dim/2]
};

}  // namespace titan::nn
