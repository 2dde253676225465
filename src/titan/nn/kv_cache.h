// Per-layer key/value caches of an incremental (decode) forward: Decoder::forward_cached fills
// them, Attention::forward_cached appends to its layer's and attends over it (ops/kv_attention).
// Legend: B batch rows, C capacity (slots), G kv heads, K head dim.
//   k_BCGK[l], v_BCGK[l]: layer l's keys (after k-norm and RoPE) and values, f32 (attention layers).
//   conv_BSC[l], state_BHKV[l]: a gated DeltaNet layer's recurrent state instead (nn/gated_delta_net.h):
//   the last K - 1 inputs of its causal conv [B, K - 1, C] and the delta rule's state [B, Hv, Dk, Dv].
//   A layer holds one kind; the other's tensors are undefined.
//   Slots [0, length) are filled; row b's tokens start at slot begin_B[b] (a batch of prompts of
//   different lengths is left-padded, as HF generate pads it), so the token in slot j of row b
//   sits at position j - begin_B[b].
#pragma once

#include <vector>

#include "titan/core/tensor.h"

namespace titan::nn {

struct KvCache {
  std::vector<Tensor> k_BCGK, v_BCGK;       // one per layer
  std::vector<Tensor> conv_BSC, state_BHKV;  // one per layer
  Tensor begin_B;                            // i64 [B]
  int64_t length = 0;                        // slots filled (the same for every row)
  int64_t slots = 0;                         // C

  int64_t batch() const { return begin_B.size(0); }
  int64_t capacity() const { return slots; }
};

}  // namespace titan::nn
