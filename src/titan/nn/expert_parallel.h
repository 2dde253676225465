// The seam between the MoE block and expert parallelism (implemented over a communicator in
// parallel/expert_parallel.h). Under expert_parallel_degree = ep each rank of an ep group holds
// E_local = E / ep experts, [rank * E_local, (rank + 1) * E_local), and the dispatch rows of every
// rank's tokens travel to the rank that holds their expert:
//   plan(counts_E, rows)   exchanges the per-expert row counts (an all-to-all of E counts): what
//                          this rank sends to and receives from each rank, and where its local
//                          experts' rows start once they arrived (on the meta device, where counts
//                          have no values, every rank routes its `rows` evenly over the experts)
//   to_experts(rows_PC)    this rank's dispatch rows (sorted by expert, so one block per
//                          destination) to the experts' ranks; they arrive grouped by local expert,
//                          source rank ascending within each (the token order of the global batch)
//   from_experts(rows_RC)  the inverse: every row back to the rank and the dispatch row it came from
// Both are permutations of rows (an all-to-all and a regrouping), each the other's transpose, so
// the backward of one is the other: forward sends x out with to_experts and y back with
// from_experts; backward sends dy out with to_experts and dx back with from_experts. C is any row
// width: D for activations, 1 for the routing weights that travel with the rows.
// Legend: P this rank's dispatch rows, R the rows its experts process, C row width, E experts.
#pragma once

#include <vector>

#include "titan/core/tensor.h"

namespace titan::nn {

// One MoE forward's exchange plan, kept for its backward.
struct ExpertExchange {
  std::vector<int64_t> send_rows;     // [ep] rows this rank sends to each rank
  std::vector<int64_t> recv_rows_SE;  // [ep * E_local] rows from source rank s for local expert e
  Tensor offsets_E1;                  // i64 [E_local + 1]: the local experts' rows after to_experts
  int64_t num_rows = 0;               // R
};

class ExpertParallelOps {
 public:
  virtual ~ExpertParallelOps() = default;
  virtual int64_t degree() const = 0;
  virtual int64_t rank() const = 0;
  // counts_E: i64 [E] this rank's rows per (global) expert, the dispatch layout's; rows: their sum.
  virtual ExpertExchange plan(const Tensor& counts_E, int64_t rows) = 0;
  virtual Tensor to_experts(const Tensor& rows_PC, const ExpertExchange& exchange) = 0;    // -> [R, C]
  virtual Tensor from_experts(const Tensor& rows_RC, const ExpertExchange& exchange) = 0;  // -> [P, C]
};

}  // namespace titan::nn
