// The MPI communicator (OpenMPI from Debian; any MPI-3 library). MPI is initialized on the first
// world_comm() call of a process started by mpirun / srun, with MPI_THREAD_FUNNELED: only the
// training thread calls MPI (the data loader's thread never does).
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "titan/core/dtype.h"
#include "titan/core/error.h"
#include "titan/parallel/comm.h"

namespace titan::parallel {
namespace {

int count(int64_t n, const char* what) {
  TITAN_CHECK(n >= 0 && n <= INT_MAX, "[parallel] ", what, " of ", n, " elements is beyond MPI's int count");
  return static_cast<int>(n);
}

void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  TITAN_FAIL("[parallel] ", call, " failed: ", std::string(text, static_cast<size_t>(length)));
}

// inout[i] = bf16(f32(in[i]) + f32(inout[i])): MPI has no bf16 sum (MPI_Op_create, commutative).
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}

// "0,1,2": the MPI_COMM_WORLD ranks of `comm`'s members, in its rank order.
std::string world_ranks(MPI_Comm comm, int size) {
  MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> mine(static_cast<size_t>(size)), theirs(static_cast<size_t>(size));
  for (int i = 0; i < size; ++i) mine[static_cast<size_t>(i)] = i;
  MPI_Group_translate_ranks(group, size, mine.data(), world, theirs.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  std::string out;
  for (int r : theirs) {
    if (!out.empty()) out += ',';
    out += std::to_string(r);
  }
  return out;
}

MPI_Op bf16_sum_op() {
  static MPI_Op op = [] {
    MPI_Op created = MPI_OP_NULL;
    check(MPI_Op_create(&bf16_sum, /*commute=*/1, &created), "MPI_Op_create");
    return created;
  }();
  return op;
}

// The MPI element type of a dtype: typed transfers keep counts in elements (MPI's int counts then
// reach 2^31 elements, not bytes).
MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return MPI_FLOAT;
    case DType::f64: return MPI_DOUBLE;
    case DType::bf16:
    case DType::f16: return MPI_UINT16_T;
    case DType::i32: return MPI_INT32_T;
    case DType::i64: return MPI_INT64_T;
    case DType::u8: return MPI_UINT8_T;
    case DType::i8: return MPI_INT8_T;
  }
  return MPI_BYTE;
}

// The collective watchdog (set_collective_timeout). The training thread marks each waiting MPI
// call (Watched); the watchdog thread reads the mark once a second and ends the process when one
// has waited past the limit. Only the training thread calls MPI, so one mark is enough.
class Watchdog {
 public:
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void set_timeout(double seconds) {
    timeout_ns_.store(static_cast<int64_t>(seconds * 1e9));
    if (seconds > 0 && !thread_.joinable()) thread_ = std::thread([this] { run(); });
  }
  void enter(const char* call, const std::string* ranks) {
    call_ = call;
    ranks_ = ranks;
    since_ns_.store(now_ns());
  }
  void leave() { since_ns_.store(0); }

 private:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) {
      const int64_t since = since_ns_.load(), limit = timeout_ns_.load();
      if (since == 0 || limit <= 0 || now_ns() - since <= limit) continue;
      const LaunchInfo me = launch_info();
      const std::string line =
          str("titan: error: [rank ", me.rank, " of ", me.world, "] [comm] ", call_.load(), " among world ranks ",
              *ranks_.load(), " has waited ", (now_ns() - since) / 1000000000, " s, past comm.timeout_seconds = ",
              limit / 1000000000, ": another rank of it stopped answering (stalled, stopped or dead). HINT: look "
              "for the rank that did not reach this call; raise comm.timeout_seconds if a slow step is expected");
      std::fprintf(stderr, "%s\n", line.c_str());
      std::fflush(stderr);
      std::fflush(stdout);
      record_launch_error(me.rank, 1, line);
      std::_Exit(1);  // MPI is busy on the training thread: end the process; mpirun ends the job
    }
  }

  std::atomic<int64_t> timeout_ns_{0}, since_ns_{0};
  std::atomic<const char*> call_{""};
  std::atomic<const std::string*> ranks_{nullptr};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

Watchdog& watchdog() {
  static Watchdog w;
  return w;
}

// A waiting MPI call, for the watchdog's whole duration of it.
class Watched {
 public:
  Watched(const char* call, const std::string& ranks) { watchdog().enter(call, &ranks); }
  ~Watched() { watchdog().leave(); }
  Watched(const Watched&) = delete;
  Watched& operator=(const Watched&) = delete;
};

class MpiPending final : public Pending {
 public:
  MpiPending(const char* call, const std::string& ranks) : call_(call), ranks_(ranks) {}
  MPI_Request request = MPI_REQUEST_NULL;
  ~MpiPending() override {
    if (request != MPI_REQUEST_NULL) MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  void wait() override {
    const Watched w(call_, ranks_);
    check(MPI_Wait(&request, MPI_STATUS_IGNORE), "MPI_Wait");
  }

 private:
  const char* call_;           // "MPI_Iallgather (wait)", for the watchdog
  const std::string& ranks_;   // the communicator's, which outlives its requests
};

// A posted receive: wait() finishes it and checks the message filled the whole tensor.
class MpiRecvPending final : public Pending {
 public:
  MpiRecvPending(const std::string& ranks, std::string what, MPI_Datatype type, int expected)
      : ranks_(ranks), what_(std::move(what)), type_(type), expected_(expected) {}
  MPI_Request request = MPI_REQUEST_NULL;
  ~MpiRecvPending() override {
    if (request != MPI_REQUEST_NULL) MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  void wait() override {
    MPI_Status status;
    {
      const Watched w("MPI_Irecv (wait)", ranks_);
      check(MPI_Wait(&request, &status), "MPI_Wait");
    }
    int got = 0, bytes = 0;
    check(MPI_Get_count(&status, type_, &got), "MPI_Get_count");
    check(MPI_Get_count(&status, MPI_BYTE, &bytes), "MPI_Get_count");
    TITAN_CHECK(got == expected_, what_, ": expected ", expected_, " elements, got a message of ", bytes,
                " bytes. HINT: the receiver's tensor must have the sender's dtype and numel");
  }

 private:
  const std::string& ranks_;  // the communicator's, which outlives its requests
  std::string what_;          // "[comm] recv from rank 1 (tag 3) into f32[4]"
  MPI_Datatype type_;
  int expected_;
};

class MpiComm final : public Comm {
 public:
  explicit MpiComm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    void* tag_ub = nullptr;
    int found = 0;
    MPI_Comm_get_attr(comm_, MPI_TAG_UB, &tag_ub, &found);
    if (found) tag_ub_ = *static_cast<int*>(tag_ub);
    ranks_ = world_ranks(comm_, size_);
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }

  void all_reduce_sum(float* data, int64_t n) override { reduce(data, n, MPI_FLOAT, MPI_SUM); }
  void all_reduce_sum(double* data, int64_t n) override { reduce(data, n, MPI_DOUBLE, MPI_SUM); }
  void all_reduce_sum(int64_t* data, int64_t n) override { reduce(data, n, MPI_INT64_T, MPI_SUM); }
  void all_reduce_max(double* data, int64_t n) override { reduce(data, n, MPI_DOUBLE, MPI_MAX); }
  void all_gather(const float* in, float* out, int64_t n) override {
    const int c = count(n, "all_gather");
    const Watched w("MPI_Allgather", ranks_);
    check(MPI_Allgather(in, c, MPI_FLOAT, out, c, MPI_FLOAT, comm_), "MPI_Allgather");
  }
  std::unique_ptr<Pending> start_all_gather(const float* in, float* out, int64_t n) override {
    const int c = count(n, "all_gather");
    auto p = std::make_unique<MpiPending>("MPI_Iallgather (wait)", ranks_);
    check(MPI_Iallgather(in, c, MPI_FLOAT, out, c, MPI_FLOAT, comm_, &p->request), "MPI_Iallgather");
    return p;
  }
  void reduce_scatter_sum(const float* in, float* out, int64_t n) override {
    const int c = count(n, "reduce_scatter");
    const Watched w("MPI_Reduce_scatter_block", ranks_);
    check(MPI_Reduce_scatter_block(in, out, c, MPI_FLOAT, MPI_SUM, comm_), "MPI_Reduce_scatter_block");
  }
  void reduce_scatter_sum(const uint16_t* in, uint16_t* out, int64_t n) override {
    const int c = count(n, "reduce_scatter");
    const Watched w("MPI_Reduce_scatter_block", ranks_);
    check(MPI_Reduce_scatter_block(in, out, c, MPI_UINT16_T, bf16_sum_op(), comm_), "MPI_Reduce_scatter_block");
  }
  // MPI_Alltoallv's int counts and displacements: the exchange is refused beyond 2^31 elements.
  void all_to_all_v(const float* in, const int64_t* send_counts, float* out, const int64_t* recv_counts) override {
    const auto n = static_cast<size_t>(size_);
    std::vector<int> sc(n), sd(n), rc(n), rd(n);
    int64_t s_at = 0, r_at = 0;
    for (size_t r = 0; r < n; ++r) {
      sc[r] = count(send_counts[r], "all_to_all_v send");
      rc[r] = count(recv_counts[r], "all_to_all_v recv");
      sd[r] = count(s_at, "all_to_all_v send displacement");
      rd[r] = count(r_at, "all_to_all_v recv displacement");
      s_at += send_counts[r];
      r_at += recv_counts[r];
    }
    const Watched w("MPI_Alltoallv", ranks_);
    check(MPI_Alltoallv(in, sc.data(), sd.data(), MPI_FLOAT, out, rc.data(), rd.data(), MPI_FLOAT, comm_),
          "MPI_Alltoallv");
  }
  void all_to_all(const int64_t* in, int64_t* out, int64_t n) override {
    const int c = count(n, "all_to_all");
    const Watched w("MPI_Alltoall", ranks_);
    check(MPI_Alltoall(in, c, MPI_INT64_T, out, c, MPI_INT64_T, comm_), "MPI_Alltoall");
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    const Watched w("MPI_Bcast", ranks_);
    check(MPI_Bcast(data, count(bytes, "broadcast"), MPI_BYTE, root, comm_), "MPI_Bcast");
  }
  void barrier() override {
    const Watched w("MPI_Barrier", ranks_);
    check(MPI_Barrier(comm_), "MPI_Barrier");
  }
  std::unique_ptr<Comm> split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    const Watched w("MPI_Comm_split", ranks_);
    check(MPI_Comm_split(comm_, color, key, &sub), "MPI_Comm_split");
    return std::make_unique<MpiComm>(sub, true);
  }

  void send(const Tensor& t, int dst, int tag) override {
    check_point_to_point("send", t, dst, tag);
    check_tag("send", " to rank ", dst, tag);
    const int c = count(t.numel(), "send");
    const Watched w("MPI_Send", ranks_);
    check(MPI_Send(t.raw_data(), c, mpi_type(t.dtype()), dst, tag, comm_), "MPI_Send");
  }

  std::unique_ptr<Pending> start_send(const Tensor& t, int dst, int tag) override {
    check_point_to_point("send", t, dst, tag);
    check_tag("send", " to rank ", dst, tag);
    const int c = count(t.numel(), "send");
    auto p = std::make_unique<MpiPending>("MPI_Isend (wait)", ranks_);
    check(MPI_Isend(t.raw_data(), c, mpi_type(t.dtype()), dst, tag, comm_, &p->request), "MPI_Isend");
    return p;
  }

  std::unique_ptr<Pending> start_recv(Tensor& t, int src, int tag) override {
    check_point_to_point("recv", t, src, tag);
    check_tag("recv", " from rank ", src, tag);
    const int c = count(t.numel(), "recv");
    const MPI_Datatype type = mpi_type(t.dtype());
    auto p = std::make_unique<MpiRecvPending>(
        ranks_, str("[comm] recv from rank ", src, " (tag ", tag, ") into ", t.describe()), type, c);
    check(MPI_Irecv(t.raw_data(), c, type, src, tag, comm_, &p->request), "MPI_Irecv");
    return p;
  }

  // Probes first, so a message of the wrong size is refused before it is received (MPI_Recv would
  // truncate a longer one, an error that is fatal under MPI's default handler, and silently
  // accept a shorter one). A refused message stays queued.
  void recv(Tensor& t, int src, int tag) override {
    check_point_to_point("recv", t, src, tag);
    check_tag("recv", " from rank ", src, tag);
    const int c = count(t.numel(), "recv");
    const MPI_Datatype type = mpi_type(t.dtype());
    MPI_Status status;
    const Watched w("MPI_Probe / MPI_Recv", ranks_);
    check(MPI_Probe(src, tag, comm_, &status), "MPI_Probe");
    int got = 0, bytes = 0;
    check(MPI_Get_count(&status, type, &got), "MPI_Get_count");
    check(MPI_Get_count(&status, MPI_BYTE, &bytes), "MPI_Get_count");
    TITAN_CHECK(got == c, "[comm] recv from rank ", src, " (tag ", tag, ") into ", t.describe(), ": expected ",
                c, " elements (", t.nbytes(), " bytes), got a message of ", bytes,
                " bytes. HINT: the receiver's tensor must have the sender's dtype and numel");
    check(MPI_Recv(t.raw_data(), c, type, src, tag, comm_, MPI_STATUS_IGNORE), "MPI_Recv");
  }

  // The Tensor forms of the collectives (Comm's non-virtual overloads), not hidden by the above.
  using Comm::all_gather;
  using Comm::all_reduce_max;
  using Comm::all_reduce_sum;
  using Comm::all_to_all;
  using Comm::all_to_all_v;
  using Comm::reduce_scatter_sum;
  using Comm::start_all_gather;

 private:
  void reduce(void* data, int64_t n, MPI_Datatype type, MPI_Op op) {
    if (n == 0) return;
    const Watched w("MPI_Allreduce", ranks_);
    check(MPI_Allreduce(MPI_IN_PLACE, data, count(n, "all_reduce"), type, op, comm_), "MPI_Allreduce");
  }
  void check_tag(const char* call, const char* dir, int peer, int tag) const {
    TITAN_CHECK(tag <= tag_ub_, "[comm] ", call, dir, peer, ": tag ", tag, " is above this MPI's MPI_TAG_UB (",
                tag_ub_, ")");
  }
  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;  // the least MPI_TAG_UB the standard allows
  std::string ranks_;   // "0,1": this communicator's ranks in MPI_COMM_WORLD, for the watchdog
};

// MPI_Finalize at exit, after every communicator is gone.
struct MpiSession {
  std::unique_ptr<Comm> world;
  ~MpiSession() {
    world.reset();
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Finalize();
  }
};

MpiSession& session() {
  static MpiSession s;
  return s;
}

}  // namespace

bool mpi_available() { return true; }

Comm& world_comm() {
  MpiSession& s = session();
  if (s.world) return *s.world;
  const LaunchInfo info = launch_info();
  if (!info.under_mpi) {
    s.world = make_local_comm();
    return *s.world;
  }
  int provided = 0;
  check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  TITAN_CHECK(provided >= MPI_THREAD_FUNNELED, "[parallel] the MPI library gives thread level ", provided,
              ", titan needs MPI_THREAD_FUNNELED");
  s.world = std::make_unique<MpiComm>(MPI_COMM_WORLD, false);
  return *s.world;
}

void set_collective_timeout(double seconds) { watchdog().set_timeout(seconds); }

void abort_world(int code) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized) return;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size <= 1) return;
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
}

}  // namespace titan::parallel
