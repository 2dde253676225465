// Expert parallelism over one communicator (the mesh's `ep` group): nn::ExpertParallelOps's
// exchange of MoE dispatch rows as two all-to-alls, the per-expert counts first (a fixed-size
// all_to_all of E counts), then the rows (all_to_all_v), regrouped by local expert. The MoE
// block drives it (nn/moe.cpp); parallelize.h gives each block this rank's experts.
#pragma once

#include "titan/nn/expert_parallel.h"
#include "titan/parallel/comm.h"
#include "titan/parallel/fsdp.h"

namespace titan::parallel {

class ExpertParallel final : public nn::ExpertParallelOps {
 public:
  // `ep` must outlive this object; num_experts is the model's (every rank's experts together).
  ExpertParallel(Comm& ep, int64_t num_experts);

  int64_t degree() const override { return comm_.size(); }
  int64_t rank() const override { return comm_.rank(); }
  nn::ExpertExchange plan(const Tensor& counts_E, int64_t rows) override;
  Tensor to_experts(const Tensor& rows_PC, const nn::ExpertExchange& exchange) override;
  Tensor from_experts(const Tensor& rows_RC, const nn::ExpertExchange& exchange) override;

  const CommStats& stats() const { return stats_; }  // all_to_all_bytes: rows sent and received
  void reset_stats() { stats_ = {}; }

 private:
  Comm& comm_;
  int64_t num_local_;  // experts per rank
  CommStats stats_;
};

}  // namespace titan::parallel
