// Tensor parallelism over the mesh's tp communicator: the nn::TensorParallelOps a decoder built
// with one rank's share of heads, FFN width and vocabulary calls (nn/tensor_parallel.h), with
// optional sequence parallelism (norms and residuals on this rank's N/tp tokens).
#pragma once

#include "titan/nn/tensor_parallel.h"
#include "titan/parallel/comm.h"
#include "titan/parallel/fsdp.h"

namespace titan::parallel {

class TensorParallel final : public nn::TensorParallelOps {
 public:
  TensorParallel(Comm& tp, bool sequence_parallel) : comm_(tp), sequence_parallel_(sequence_parallel) {}

  int64_t degree() const override { return comm_.size(); }
  int64_t rank() const override { return comm_.rank(); }
  bool sequence_parallel() const override { return sequence_parallel_; }
  Tensor enter(const Tensor& x_ND) override;
  Tensor enter_backward(const Tensor& dx_full_ND) override;
  Tensor leave(const Tensor& partial_ND) override;
  Tensor leave_backward(const Tensor& dy_ND) override;
  ops::LmHeadXentResult head_xent(const Tensor& x_ND, const Tensor& w_VD, int64_t vocab_start, const Tensor& targets_N,
                                  float grad_scale, Tensor& dx_ND, Tensor& dw_VD) override;

  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = {}; }

 private:
  Tensor gather_tokens(const Tensor& x_ND);
  Tensor scatter_tokens(const Tensor& full_ND);
  void all_reduce(Tensor& x);
  Comm& comm_;
  bool sequence_parallel_;
  CommStats stats_;
};

}  // namespace titan::parallel
