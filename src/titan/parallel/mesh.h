// DeviceMesh: the world's ranks laid out on named dimensions, outermost first:
//   pp            pipeline stages (activations and their gradients sent between neighbours)
//   dp_replicate  HSDP replicas (gradients all-reduced across them)
//   dp_shard      FSDP shards (parameters, gradients and optimizer state split across them)
//   cp            context parallel: the same rows, each rank a chunk of their sequence (degree 1
//                 until ring attention lands, nn/sequence_attention.h)
//   tp            tensor parallel (innermost, so a tp group sits on one node)
// rank = (((r_pp * dp_replicate + r_replicate) * dp_shard + r_shard) * cp + r_cp) * tp + r_tp, as
// torchtitan orders its mesh. dims() lists them as data: each dimension's name, degree,
// communicator, and what it splits (parameters; the batch's rows or its sequence), which the
// batch split and the token accounting read instead of naming dimensions. Each dimension has its own sub-communicator, and `dp` spans replicate x shard
// (the ranks that see different data). Expert parallelism borrows its ranks from dp_shard
// (torchtitan's layout): ep consecutive dp_shard ranks form an `ep` group (they exchange tokens and
// each holds 1/ep of the experts), and `expert_dp` joins the ranks that hold the same experts (the
// other dp ranks of the stage), over which expert gradients are summed: groups derived from
// dp_shard, not dimensions of their own.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "titan/parallel/comm.h"

namespace titan::parallel {

struct MeshDegrees {
  int64_t dp_replicate = 1;
  int64_t dp_shard = -1;  // -1: every rank the other dimensions leave
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t ep = 1;  // borrowed from dp_shard: must divide it (config::validate_expert_parallel)
  int64_t cp = 1;
  int64_t dp() const { return dp_replicate * dp_shard; }
  // "dp_replicate=1 dp_shard=4 tp=1"; "pp=2 dp_replicate=1 ..." with pp > 1, "... cp=2 ..." with
  // cp > 1, "... ep=2" with ep > 1
  std::string describe() const;
};

// -1 resolved; throws a one-line Error naming the parallelism.* fields when a degree is < 1 (or
// -1 twice) or the degrees do not multiply to `world`.
MeshDegrees resolve_mesh(MeshDegrees requested, int64_t world);

// What a mesh dimension splits among its ranks.
enum class BatchSplit {
  none,      // every rank of the dimension sees the same tokens (pp, tp)
  rows,      // different rows of the global batch (dp_replicate, dp_shard)
  sequence,  // the same rows, different chunks of their sequence (cp)
};

struct MeshDim {
  std::string name;  // "pp", "dp_replicate", "dp_shard", "cp", "tp"
  int64_t degree = 1;
  Comm* comm = nullptr;            // this rank's group along the dimension (owned by the mesh)
  bool shards_parameters = false;  // each rank holds a part of every parameter it has (FSDP, TP)
  BatchSplit batch = BatchSplit::none;
};

class DeviceMesh {
 public:
  // `world` must outlive the mesh; `degrees` resolved for world.size().
  DeviceMesh(Comm& world, MeshDegrees degrees);

  const MeshDegrees& degrees() const { return degrees_; }
  Comm& world() { return world_; }
  Comm& dp_replicate() { return *replicate_; }
  Comm& dp_shard() { return *shard_; }
  Comm& tp() { return *tp_; }
  Comm& dp() { return *dp_; }
  Comm& pp() { return *pp_; }  // rank = stage rank
  Comm& ep() { return *ep_; }
  Comm& expert_dp() { return *expert_dp_; }
  // The ranks of one data-parallel replica in one pipeline stage (dp_shard x tp): together they hold
  // each of the stage's parameters once (Muon assembles whole matrices over them).
  Comm& replica() { return *replica_; }
  Comm& cp() { return *cp_; }
  int64_t dp_rank() const { return dp_rank_; }  // which share of the global batch this rank takes

  // The dimensions, outermost first (pp, dp_replicate, dp_shard, cp, tp; degree 1 ones included).
  const std::vector<MeshDim>& dims() const { return dims_; }
  const MeshDim& dim(std::string_view name) const;  // throws for a name not in dims()
  // The product of the degrees of the dimensions that split the batch `how`: rows -> the global
  // batch's shares (dp), sequence -> the chunks of each row (cp).
  int64_t ways(BatchSplit how) const;
  // This rank's share along them: its rows share (dp_rank) or its chunk of the sequence.
  int64_t way(BatchSplit how) const;
  // The ranks that process the same rows of the batch (world / rows ways: pp, cp, tp): a rank's
  // tokens/s is its rows' tokens over them.
  int64_t ranks_per_row() const;

 private:
  Comm& world_;
  MeshDegrees degrees_;
  std::unique_ptr<Comm> replicate_, shard_, cp_, tp_, dp_, pp_, ep_, expert_dp_, replica_;
  int64_t dp_rank_ = 0;
  std::vector<MeshDim> dims_;
};

}  // namespace titan::parallel
