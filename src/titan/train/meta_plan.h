// What one rank of a job holds, measured instead of predicted: the job's real model, parallelize and
// optimizer built on the meta device (core/tensor.h: shapes, no values) for a simulated rank of the
// mesh (parallel::make_meta_comm), then one training step (run_step) with every op's contract check
// and allocation and no kernel. The meta allocator's figures are the host allocator's of the same
// run: whatever a module, an op or a plugin allocates is counted, so nothing is restated as a
// formula. `titan plan` runs it per layout and pipeline rank; the memory floor for this rank.
//
// One assumption where a run's sizes depend on values: under expert parallelism every rank routes
// its tokens evenly over the experts (parallel/expert_parallel.cpp, balanced on meta). Not counted,
// as in the metrics' memory field: memory outside the allocator (kernel scratch in std::vector,
// libraries, the OS's view of it; peak RSS is larger).
#pragma once

#include <cstdint>

#include "titan/config/job_config.h"
#include "titan/models/model_spec.h"
#include "titan/nn/config_tree.h"
#include "titan/parallel/fsdp.h"
#include "titan/parallel/mesh.h"

namespace titan::train {

struct MetaPlan {
  double parameters = 0;  // live once the model is parallelized: this rank's parameters, gradients, buffers
  double optimizer = 0;   // the optimizer's state on top
  double peak = 0;        // the step's allocator peak (the metrics' memory field), states included
  parallel::CommStats comm;  // what the step passed to collectives (the metrics' comm field)
  double step() const { return peak - parameters - optimizer; }  // activations, gathers, temporaries
};

// `config` resolved and validated as titan train's; `degrees` resolved for the job's world; `rank`
// the world rank simulated. Throws what titan train's setup would for the model and the mesh.
MetaPlan meta_plan(const config::JobConfig& config, const models::ResolvedModel& model, const nn::ConfigTree& tree,
                   const parallel::MeshDegrees& degrees, int rank);

// The world rank of pipeline stage rank `pp_rank` with every other coordinate 0.
int pipeline_rank(const parallel::MeshDegrees& degrees, int64_t pp_rank);

}  // namespace titan::train
