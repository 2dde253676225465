// Comm: the one seam every collective goes through. Implementations: MPI (CPU, any number of nodes;
// comm_mpi.cpp), a single-process one (size 1, no MPI; LocalComm in comm.cpp, made by
// make_local_comm), a simulated rank of a job for meta runs (make_meta_comm: moves nothing), and
// NCCL on GPUs later, all behind this interface. The Tensor forms check meta tensors as any other
// and move nothing for them (they have no values). Sums of floats reduce in
// fp32 (FSDP's gradient reduce-scatter), of doubles in fp64 (losses, norms). Calls are blocking
// unless they return a Pending; every rank of a communicator must make the same calls in the same
// order.
// The public API is Tensors (non-virtual collectives: they check contiguity, dtype, sizes and the
// device once, then call the backend's protected raw-pointer form; point to point is Tensors all
// the way), plus small host-value helpers over the Tensor forms (losses, counts, flags). Every
// transfer has a Pending form or gets one as a backend needs it: start_all_gather, start_send,
// start_recv today.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "titan/core/tensor.h"

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

  virtual void barrier() = 0;
  // Ranks with the same color form a new communicator, ordered by key.
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;
  // split() where the caller knows the group: `size` ranks, this one at `key` (keys 0..size-1);
  // checked against what split returned. A simulated rank (make_meta_comm) has no other ranks to
  // ask, so it makes its groups from these.
  virtual std::unique_ptr<Comm> split_group(int color, int key, int size);

  // Point to point, blocking: `t` goes to rank `dst`, which receives it with recv(t', rank(), tag).
  // The tensor's dtype and shape are the contract between the two ranks: recv fills a preallocated
  // contiguous host tensor of the sender's dtype and numel, and refuses a message of another size.
  // Messages between two ranks with the same tag arrive in the order they were sent. tag >= 0.
  virtual void send(const Tensor& t, int dst, int tag) = 0;
  virtual void recv(Tensor& t, int src, int tag) = 0;
  // send() that returns at once (the pipeline's sends, so two neighbours sending to each other
  // never wait on each other); `t` must stay alive and unchanged until the Pending is waited for.
  virtual std::unique_ptr<Pending> start_send(const Tensor& t, int dst, int tag) = 0;
  // recv() that returns at once: the receive is posted now and `t` is filled when the Pending's
  // wait() returns (a ring exchange: start_send to one neighbour, start_recv from the other, work,
  // then wait for both; context parallelism's keys and values go round so). `t` must stay alive and
  // untouched until then. wait() refuses a shorter message in one line, as recv does; a longer one
  // is the transport's truncation error (the two ranks' shapes are their contract).
  virtual std::unique_ptr<Pending> start_recv(Tensor& t, int src, int tag) = 0;

  // The collectives above on contiguous host tensors (sizes in elements, any shapes):
  //   all_reduce_sum: f32, f64 or i64, in place;
  //   all_gather / start_all_gather: f32 (start_all_gather also bf16 with an even in.numel()),
  //     out.numel() == size() * in.numel() (every rank's in, in
  //     rank order); the Pending keeps both tensors' storage alive until it is done;
  //   reduce_scatter_sum: f32 or bf16 (both sides alike), in.numel() == size() * out.numel();
  //   all_to_all_v: f32; one count per rank on each side, summing to in.numel() / out.numel();
  //   all_to_all: i64, in.numel() == out.numel(), a multiple of size().
  // Every rank must pass the same sizes; a bad tensor is an Error before anything is sent.
  void all_reduce_sum(Tensor& t);
  void all_reduce_max(Tensor& t);  // f64, in place
  void all_gather(const Tensor& in, Tensor& out);
  std::unique_ptr<Pending> start_all_gather(const Tensor& in, Tensor& out);
  void reduce_scatter_sum(const Tensor& in, Tensor& out);
  void all_to_all_v(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                    const std::vector<int64_t>& recv_counts);
  void all_to_all(const Tensor& in, Tensor& out);

  //   broadcast: any dtype, root's values into every rank's t (same dtype and numel everywhere).
  void broadcast(Tensor& t, int root);
  // Host values through the Tensor forms: a few sums or maxima in place, and one sum returned.
  void all_reduce_sum(std::span<double> x);
  void all_reduce_sum(std::span<int64_t> x);
  void all_reduce_max(std::span<double> x);
  double sum(double x) {
    all_reduce_sum(std::span<double>(&x, 1));
    return x;
  }

  // Every rank's string (rank order), on every rank.
  std::vector<std::string> all_gather_strings(const std::string& mine);
  // root's string, on every rank.
  std::string broadcast_string(const std::string& s, int root);

 protected:
  // What each backend implements under the Tensor forms (called only after their checks).
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
  // The same over bf16 values, summed in bf16 as NCCL's bf16 reduction does: each pairwise sum is
  // taken in f32 and rounded to bf16 (training.mixed_precision_reduce=bfloat16; half the traffic).
  virtual void reduce_scatter_sum(const uint16_t* in, uint16_t* out, int64_t n) = 0;
  // All to all with per-rank sizes (expert parallelism's token exchange): `in` is size() blocks in
  // rank order, send_counts[r] elements for rank r; `out` receives recv_counts[s] elements from
  // each rank s, in rank order. recv_counts[s] must be rank s's send_counts[rank()]: exchange the
  // counts first with all_to_all.
  virtual void all_to_all_v(const float* in, const int64_t* send_counts, float* out, const int64_t* recv_counts) = 0;
  // out[s * n, (s + 1) * n) = rank s's in[rank() * n, (rank() + 1) * n): n values to each rank.
  virtual void all_to_all(const int64_t* in, int64_t* out, int64_t n) = 0;
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;

  // What every send/recv checks before moving bytes: `t` is a defined, contiguous tensor on the
  // CPU, `peer` is another rank of this communicator and tag >= 0. `call` is "send" or "recv".
  void check_point_to_point(const char* call, const Tensor& t, int peer, int tag) const;
};

// Adds the wall time of its scope to `total` (the time spent in collectives, for the metrics).
struct CommTimer {
  double& total;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~CommTimer() { total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); }
};

// The single-process communicator (size 1): collectives are copies.
std::unique_ptr<Comm> make_local_comm();

// Rank `rank` of a `size`-rank job, simulated in this process for a meta run (train/meta_plan.h):
// every call checks its arguments and moves nothing (host values stay this rank's own); groups come
// from split_group.
std::unique_ptr<Comm> make_meta_comm(int rank, int size);

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

// The collective watchdog of the MPI communicators (comm.timeout_seconds): a call that waits on
// other ranks (a collective, a barrier, a send or receive) for longer than `seconds` prints the
// call, its communicator's world ranks and the wait as this rank's error line, and ends this
// process with exit code 1, so that mpirun takes the job down. 0 turns it off (the default). A
// thread checks once a second; it never calls MPI (MPI_THREAD_FUNNELED).
void set_collective_timeout(double seconds);

// A rank's fatal line for titan launch, which repeats it as its own last line: written to
// $TITAN_LAUNCH_ERRORS/rank<r>.error ("<code>\n<line>\n") when that is set; else nothing.
void record_launch_error(int rank, int code, const std::string& line);

}  // namespace titan::parallel
