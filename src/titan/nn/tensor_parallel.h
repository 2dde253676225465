// The seam between the modules and tensor parallelism (Megatron style; implemented over a
// communicator in parallel/tensor_parallel.h). A TP region (attention, feed-forward, the head)
// reads full activations and its column-/row-parallel weights give partial sums of its output:
//   enter(x)    the region's input: identity, or with sequence parallelism an all-gather of every
//               rank's tokens ([N/tp, D] -> [N, D]); its backward sums the ranks' partial input
//               gradients (all-reduce, or reduce-scatter back to this rank's tokens)
//   leave(y)    the region's partial output summed over the ranks (all-reduce, or reduce-scatter
//               to this rank's tokens); its backward is the identity (or an all-gather)
// Tokens are split in N = B*T order: rank r holds rows [r N/tp, (r+1) N/tp).
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/softmax_xent/softmax_xent.h"

namespace titan::nn {

class TensorParallelOps {
 public:
  virtual ~TensorParallelOps() = default;
  virtual int64_t degree() const = 0;
  virtual int64_t rank() const = 0;
  virtual bool sequence_parallel() const = 0;
  virtual Tensor enter(const Tensor& x_ND) = 0;
  virtual Tensor enter_backward(const Tensor& dx_full_ND) = 0;
  virtual Tensor leave(const Tensor& partial_ND) = 0;
  virtual Tensor leave_backward(const Tensor& dy_ND) = 0;
  // Vocabulary-parallel fused head + cross-entropy: w_VD holds vocabulary rows [vocab_start,
  // vocab_start + V_local) of the head; targets are global ids. The loss is the global one (every
  // rank gets it); dx_ND (full tokens) is this rank's partial sum, dw_VD accumulates its rows.
  virtual ops::LmHeadXentResult head_xent(const Tensor& x_ND, const Tensor& w_VD, int64_t vocab_start,
                                          const Tensor& targets_N, float grad_scale, Tensor& dx_ND,
                                          Tensor& dw_VD) = 0;
};

}  // namespace titan::nn
