// Comm: the one seam every collective goes through. Implementations: MPI (CPU, any number of nodes;
// comm_mpi.cpp), a single-process one (size 1, no MPI; comm_local.cpp), and NCCL on GPUs later,
// all behind this interface. Sums of floats reduce in fp32 (FSDP's gradient reduce-scatter), of
// doubles in fp64 (losses, norms). Calls are blocking unless they return a Pending; every rank of a
// communicator must make the same calls in the same order.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace titan::parallel {

// A collective in flight; wait() finishes it (its buffers must stay alive until then).
class Pending {
 public:
  virtual ~Pending() = default;
  virtual void wait() = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;  // "mpi", "local"

  // In place: data[i] = sum over ranks of data[i].
  virtual void all_reduce_sum(float* data, int64_t n) = 0;
  virtual void all_reduce_sum(double* data, int64_t n) = 0;
  virtual void all_reduce_sum(int64_t* data, int64_t n) = 0;
  virtual void all_reduce_max(double* data, int64_t n) = 0;
  // out[size * n] = every rank's in[n], in rank order.
  virtual void all_gather(const float* in, float* out, int64_t n) = 0;
  virtual std::unique_ptr<Pending> start_all_gather(const float* in, float* out, int64_t n) = 0;
  // out[n] = sum over ranks r of in[rank() * n .. (rank() + 1) * n) of rank r's in[size * n].
  virtual void reduce_scatter_sum(const float* in, float* out, int64_t n) = 0;
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  virtual void barrier() = 0;
  // Ranks with the same color form a new communicator, ordered by key.
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;

  // Every rank's string (rank order), on every rank.
  std::vector<std::string> all_gather_strings(const std::string& mine);
  // root's string, on every rank.
  std::string broadcast_string(const std::string& s, int root);
};

// Adds the wall time of its scope to `total` (the time spent in collectives, for the metrics).
struct CommTimer {
  double& total;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~CommTimer() { total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

// The single-process communicator (size 1): collectives are copies.
std::unique_ptr<Comm> make_local_comm();

// How this process was started: by mpirun / srun (the MPI environment says so) or alone.
struct LaunchInfo {
  bool under_mpi = false;
  int rank = 0;
  int world = 1;
  int local_rank = 0;
  int local_world = 1;
};
LaunchInfo launch_info();

// The world communicator: MPI when launched under MPI (MPI_Init on first call; finalized at exit),
// else the local one. Under MPI in a build without MPI: an Error naming the fix.
Comm& world_comm();
bool mpi_available();  // this build has the MPI communicator
// After an error on one rank of a multi-rank job: takes every rank down now (no hang in a
// collective). No-op in a single-process run.
void abort_world(int code);

}  // namespace titan::parallel
