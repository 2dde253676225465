// Every rank of a job must run the same job. An MPMD launch (`mpirun ... A : ... B`), a flag given
// to one rank only, or node-local dataset files with other contents under --hostfile trained
// without a word (two ranks logged losses 9.30 and 4.65), or ended in a raw MPI abort. At start,
// each rank compares its resolved config (config::to_toml) and its training data's identity (the
// files, sizes and a CRC of each one's head) with rank 0's; a rank that differs stops the job with
// one line naming the first differing field.
#pragma once

#include "titan/config/job_config.h"
#include "titan/parallel/comm.h"

namespace titan::train {

// No-op on one rank. Throws config::ConfigError on a rank whose job differs from rank 0's (its
// abort then ends the others, which wait for it in a barrier).
void check_ranks_agree(parallel::Comm& world, const config::JobConfig& config);

// The first line where `mine` and `rank0` differ, as "KEY: VALUE here, VALUE on rank 0"; "" when
// equal. Lines are TOML "key = value" lines under [section] headers (comments skipped).
std::string first_difference(const std::string& mine, const std::string& rank0);

}  // namespace titan::train
