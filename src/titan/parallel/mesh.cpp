#include "titan/parallel/mesh.h"

#include "titan/core/error.h"

namespace titan::parallel {

std::string MeshDegrees::describe() const {
  return str(pp > 1 ? str("pp=", pp, " ") : std::string(), "dp_replicate=", dp_replicate, " dp_shard=", dp_shard,
             " tp=", tp, ep > 1 ? str(" ep=", ep) : std::string());
}

MeshDegrees resolve_mesh(MeshDegrees d, int64_t world) {
  TITAN_CHECK(d.dp_replicate >= 1, "[parallel] parallelism.data_parallel_replicate_degree=", d.dp_replicate,
              " must be >= 1");
  TITAN_CHECK(d.tp >= 1, "[parallel] parallelism.tensor_parallel_degree=", d.tp, " must be >= 1");
  TITAN_CHECK(d.pp >= 1, "[parallel] parallelism.pipeline_parallel_degree=", d.pp, " must be >= 1");
  TITAN_CHECK(d.dp_shard == -1 || d.dp_shard >= 1, "[parallel] parallelism.data_parallel_shard_degree=", d.dp_shard,
              " must be >= 1, or -1 for the ranks the other dimensions leave");
  const int64_t others = d.pp * d.dp_replicate * d.tp;
  if (d.dp_shard == -1) {
    TITAN_CHECK(world % others == 0, "[parallel] ", world, " ranks do not split into ",
                d.pp > 1 ? str("pipeline_parallel_degree=", d.pp, " x ") : std::string(),
                "data_parallel_replicate_degree=", d.dp_replicate, " x tensor_parallel_degree=", d.tp,
                " x shards. HINT: launch a multiple of ", others, " ranks, or change the degrees");
    d.dp_shard = world / others;
  }
  TITAN_CHECK(d.pp * d.dp_replicate * d.dp_shard * d.tp == world, "[parallel] the mesh ", d.describe(), " holds ",
              d.pp * d.dp_replicate * d.dp_shard * d.tp, " ranks but the job has ", world,
              ". HINT: make parallelism.", d.pp > 1 ? "pipeline_parallel_degree x " : "",
              "data_parallel_replicate_degree x data_parallel_shard_degree x "
              "tensor_parallel_degree equal the rank count, or set data_parallel_shard_degree = -1");
  return d;
}

DeviceMesh::DeviceMesh(Comm& world, MeshDegrees d) : world_(world), degrees_(d) {
  TITAN_CHECK(d.pp * d.dp_replicate * d.dp_shard * d.tp == world.size(), "[parallel] mesh ", d.describe(), " for ",
              world.size(), " ranks (internal: resolve_mesh first)");
  const int r = world.rank();
  const int tp_size = static_cast<int>(d.tp), shard_size = static_cast<int>(d.dp_shard);
  const int rep_size = static_cast<int>(d.dp_replicate);
  const int r_tp = r % tp_size;
  const int r_shard = (r / tp_size) % shard_size;
  const int r_rep = (r / (tp_size * shard_size)) % rep_size;
  const int r_pp = r / (tp_size * shard_size * rep_size);
  const int stage = r_pp * rep_size;  // the color offset of this pipeline stage's groups
  const int pp_size = static_cast<int>(d.pp);
  replicate_ = world.split_group((r_pp * shard_size + r_shard) * tp_size + r_tp, r_rep, rep_size);
  shard_ = world.split_group(((stage + r_rep) * tp_size + r_tp), r_shard, shard_size);
  tp_ = world.split_group((stage + r_rep) * shard_size + r_shard, r_tp, tp_size);
  dp_rank_ = static_cast<int64_t>(r_rep) * shard_size + r_shard;
  dp_ = world.split_group(r_pp * tp_size + r_tp, static_cast<int>(dp_rank_), rep_size * shard_size);
  pp_ = world.split_group(r % (tp_size * shard_size * rep_size), r_pp, pp_size);
  TITAN_CHECK(d.ep >= 1 && d.dp_shard % d.ep == 0, "[parallel] expert_parallel_degree=", d.ep,
              " does not divide data_parallel_shard_degree=", d.dp_shard, " (internal: validate it first)");
  const int ep_size = static_cast<int>(d.ep), groups = shard_size / ep_size;  // ep groups per dp_shard
  const int r_ep = r_shard % ep_size, r_group = r_rep * groups + r_shard / ep_size;
  const int stage_groups = rep_size * groups;  // ep groups per pipeline stage
  ep_ = world.split_group((r_pp * stage_groups + r_group) * tp_size + r_tp, r_ep, ep_size);
  expert_dp_ = world.split_group((r_pp * ep_size + r_ep) * tp_size + r_tp, r_group, stage_groups);
  replica_ = world.split_group(stage + r_rep, r_shard * tp_size + r_tp, shard_size * tp_size);
}

}  // namespace titan::parallel
