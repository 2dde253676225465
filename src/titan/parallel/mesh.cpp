#include "titan/parallel/mesh.h"

#include "titan/core/error.h"

namespace titan::parallel {

std::string MeshDegrees::describe() const {
  return str(pp > 1 ? str("pp=", pp, " ") : std::string(), "dp_replicate=", dp_replicate, " dp_shard=", dp_shard,
             cp > 1 ? str(" cp=", cp) : std::string(), " tp=", tp, ep > 1 ? str(" ep=", ep) : std::string());
}

MeshDegrees resolve_mesh(MeshDegrees d, int64_t world) {
  TITAN_CHECK(d.dp_replicate >= 1, "[parallel] parallelism.data_parallel_replicate_degree=", d.dp_replicate,
              " must be >= 1");
  TITAN_CHECK(d.tp >= 1, "[parallel] parallelism.tensor_parallel_degree=", d.tp, " must be >= 1");
  TITAN_CHECK(d.pp >= 1, "[parallel] parallelism.pipeline_parallel_degree=", d.pp, " must be >= 1");
  TITAN_CHECK(d.cp >= 1, "[parallel] context parallel degree ", d.cp, " must be >= 1");
  TITAN_CHECK(d.dp_shard == -1 || d.dp_shard >= 1, "[parallel] parallelism.data_parallel_shard_degree=", d.dp_shard,
              " must be >= 1, or -1 for the ranks the other dimensions leave");
  const int64_t others = d.pp * d.dp_replicate * d.cp * d.tp;
  if (d.dp_shard == -1) {
    TITAN_CHECK(world % others == 0, "[parallel] ", world, " ranks do not split into ",
                d.pp > 1 ? str("pipeline_parallel_degree=", d.pp, " x ") : std::string(),
                "data_parallel_replicate_degree=", d.dp_replicate,
                d.cp > 1 ? str(" x context parallel ", d.cp) : std::string(), " x tensor_parallel_degree=", d.tp,
                " x shards. HINT: launch a multiple of ", others, " ranks, or change the degrees");
    d.dp_shard = world / others;
  }
  TITAN_CHECK(d.pp * d.dp_replicate * d.dp_shard * d.cp * d.tp == world, "[parallel] the mesh ", d.describe(),
              " holds ", d.pp * d.dp_replicate * d.dp_shard * d.cp * d.tp, " ranks but the job has ", world,
              ". HINT: make parallelism.", d.pp > 1 ? "pipeline_parallel_degree x " : "",
              "data_parallel_replicate_degree x data_parallel_shard_degree x "
              "tensor_parallel_degree equal the rank count, or set data_parallel_shard_degree = -1");
  return d;
}

// Colors below are any number the ranks of one group share and no other group has; keys order
// the ranks within it. "inner" is the cp x tp block every outer coordinate repeats.
DeviceMesh::DeviceMesh(Comm& world, MeshDegrees d) : world_(world), degrees_(d) {
  TITAN_CHECK(d.pp * d.dp_replicate * d.dp_shard * d.cp * d.tp == world.size(), "[parallel] mesh ", d.describe(),
              " for ", world.size(), " ranks (internal: resolve_mesh first)");
  const int r = world.rank();
  const int tp_size = static_cast<int>(d.tp), cp_size = static_cast<int>(d.cp), shard_size = static_cast<int>(d.dp_shard);
  const int rep_size = static_cast<int>(d.dp_replicate), pp_size = static_cast<int>(d.pp);
  const int inner_size = cp_size * tp_size;
  const int r_tp = r % tp_size;
  const int r_cp = (r / tp_size) % cp_size;
  const int r_inner = r % inner_size;  // r_cp * tp + r_tp
  const int r_shard = (r / inner_size) % shard_size;
  const int r_rep = (r / (inner_size * shard_size)) % rep_size;
  const int r_pp = r / (inner_size * shard_size * rep_size);
  const int stage = r_pp * rep_size;  // the color offset of this pipeline stage's groups
  replicate_ = world.split_group((r_pp * shard_size + r_shard) * inner_size + r_inner, r_rep, rep_size);
  shard_ = world.split_group((stage + r_rep) * inner_size + r_inner, r_shard, shard_size);
  cp_ = world.split_group(r / inner_size * tp_size + r_tp, r_cp, cp_size);
  tp_ = world.split_group(r / tp_size, r_tp, tp_size);
  dp_rank_ = static_cast<int64_t>(r_rep) * shard_size + r_shard;
  dp_ = world.split_group(r_pp * inner_size + r_inner, static_cast<int>(dp_rank_), rep_size * shard_size);
  pp_ = world.split_group(r % (inner_size * shard_size * rep_size), r_pp, pp_size);
  TITAN_CHECK(d.ep >= 1 && d.dp_shard % d.ep == 0, "[parallel] expert_parallel_degree=", d.ep,
              " does not divide data_parallel_shard_degree=", d.dp_shard, " (internal: validate it first)");
  const int ep_size = static_cast<int>(d.ep), groups = shard_size / ep_size;  // ep groups per dp_shard
  const int r_ep = r_shard % ep_size, r_group = r_rep * groups + r_shard / ep_size;
  const int stage_groups = rep_size * groups;  // ep groups per pipeline stage
  ep_ = world.split_group((r_pp * stage_groups + r_group) * inner_size + r_inner, r_ep, ep_size);
  expert_dp_ = world.split_group((r_pp * ep_size + r_ep) * inner_size + r_inner, r_group, stage_groups);
  replica_ = world.split_group((stage + r_rep) * cp_size + r_cp, r_shard * tp_size + r_tp, shard_size * tp_size);
  dims_ = {{"pp", d.pp, pp_.get(), false, BatchSplit::none},
           {"dp_replicate", d.dp_replicate, replicate_.get(), false, BatchSplit::rows},
           {"dp_shard", d.dp_shard, shard_.get(), true, BatchSplit::rows},
           {"cp", d.cp, cp_.get(), false, BatchSplit::sequence},
           {"tp", d.tp, tp_.get(), true, BatchSplit::none}};
}

const MeshDim& DeviceMesh::dim(std::string_view name) const {
  for (const MeshDim& m : dims_) {
    if (m.name == name) return m;
  }
  TITAN_FAIL("[parallel] the mesh has no dimension '", name, "' (it has pp, dp_replicate, dp_shard, cp, tp)");
}

int64_t DeviceMesh::ways(BatchSplit how) const {
  int64_t n = 1;
  for (const MeshDim& m : dims_) n *= m.batch == how ? m.degree : 1;
  return n;
}

int64_t DeviceMesh::way(BatchSplit how) const {
  int64_t index = 0;  // mixed radix over the dimensions that split `how`, outermost first
  for (const MeshDim& m : dims_) {
    if (m.batch == how) index = index * m.degree + m.comm->rank();
  }
  return index;
}

int64_t DeviceMesh::ranks_per_row() const { return world_.size() / ways(BatchSplit::rows); }

}  // namespace titan::parallel
