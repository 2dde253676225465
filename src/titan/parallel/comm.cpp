#include "titan/parallel/comm.h"

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "titan/core/error.h"

namespace titan::parallel {

std::vector<std::string> Comm::all_gather_strings(const std::string& mine) {
  const int n = size();
  std::vector<int64_t> lengths(static_cast<size_t>(n), 0);
  lengths[static_cast<size_t>(rank())] = static_cast<int64_t>(mine.size());
  all_reduce_sum(lengths.data(), n);
  std::vector<std::string> out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    std::string s = r == rank() ? mine : std::string(static_cast<size_t>(lengths[static_cast<size_t>(r)]), '\0');
    broadcast(s.data(), static_cast<int64_t>(s.size()), r);
    out[static_cast<size_t>(r)] = std::move(s);
  }
  return out;
}

std::string Comm::broadcast_string(const std::string& s, int root) {
  int64_t length = rank() == root ? static_cast<int64_t>(s.size()) : 0;
  broadcast(&length, sizeof length, root);
  std::string out = rank() == root ? s : std::string(static_cast<size_t>(length), '\0');
  broadcast(out.data(), length, root);
  return out;
}

namespace {

// "f32[3, 5] on cpu", with ", non-contiguous" when it is: what a failed check found.
std::string found(const Tensor& t) {
  return t.describe() + " on " + device_name(t.device()) + (t.is_contiguous() ? "" : ", non-contiguous");
}

// A collective or a transfer moves host memory: `t` must be defined, on the CPU (or meta, which
// moves nothing) and contiguous.
void check_host(const Comm& comm, const char* call, const char* what, const Tensor& t) {
  TITAN_CHECK(t.defined(), "[comm] ", call, " ", what, ": the tensor is undefined. HINT: allocate it first");
  TITAN_CHECK(t.device() != Device::cuda, "[comm] ", call, " ", what, ": ", t.describe(), " is on ",
              device_name(t.device()), ", but the ", comm.backend(),
              " communicator moves host memory and the NCCL communicator is not built yet. HINT: copy the "
              "tensor to the CPU first");
  TITAN_CHECK(t.is_contiguous(), "[comm] ", call, " ", what, ": expected a contiguous tensor, got ", found(t),
              ". HINT: call contiguous() first");
}

void check_f32(const Comm& comm, const char* call, const char* what, const Tensor& t) {
  check_host(comm, call, what, t);
  TITAN_CHECK(t.dtype() == DType::f32, "[comm] ", call, " ", what, ": expected f32, got ", found(t),
              ". HINT: this collective reduces or gathers f32 only");
}

// `What` holds size() * `part`'s elements (all_gather's out, reduce_scatter's in).
void check_whole(const Comm& comm, const char* call, const char* what, const Tensor& whole, const char* part_name,
                 const Tensor& part) {
  TITAN_CHECK(whole.numel() == comm.size() * part.numel(), "[comm] ", call, " ", what, ": expected ",
              comm.size() * part.numel(), " elements (", comm.size(), " ranks x ", part.numel(), " of ", part_name,
              " ", part.describe(), "), got ", whole.describe(), ". HINT: allocate ", what, " with size() * ",
              part_name, ".numel() elements");
}

struct MetaPending final : Pending {
  void wait() override {}
};

// Keeps both tensors' storage alive until the collective is done (the raw form leaves that to
// the caller). `inner` is declared last, so it finishes before the tensors are released.
struct TensorPending final : Pending {
  Tensor in, out;
  std::unique_ptr<Pending> inner;
  void wait() override { inner->wait(); }
};

// Meta tensors move nothing; a meta tensor beside a host one is a mistake.
bool on_meta(const char* call, const Tensor& a, const Tensor& b) {
  TITAN_CHECK(a.is_meta() == b.is_meta(), "[comm] ", call, ": ", found(a), " with ", found(b),
              ". HINT: both sides on one device");
  return a.is_meta();
}

class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "local"; }
  void all_reduce_sum(float*, int64_t) override {}
  void all_reduce_sum(double*, int64_t) override {}
  void all_reduce_sum(int64_t*, int64_t) override {}
  void all_reduce_max(double*, int64_t) override {}
  void all_gather(const float* in, float* out, int64_t n) override { copy(in, out, n); }
  std::unique_ptr<Pending> start_all_gather(const float* in, float* out, int64_t n) override {
    copy(in, out, n);
    return std::make_unique<Done>();
  }
  void reduce_scatter_sum(const float* in, float* out, int64_t n) override { copy(in, out, n); }
  void reduce_scatter_sum(const uint16_t* in, uint16_t* out, int64_t n) override {
    std::copy(in, in + n, out);
  }
  void all_to_all_v(const float* in, const int64_t* send_counts, float* out, const int64_t*) override {
    copy(in, out, send_counts[0]);
  }
  void all_to_all(const int64_t* in, int64_t* out, int64_t n) override { std::copy(in, in + n, out); }
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
  std::unique_ptr<Comm> split(int, int) override { return std::make_unique<LocalComm>(); }
  // One process, no peers: any transfer names the rank it wanted.
  void send(const Tensor&, int dst, int) override { no_peers("send", " to rank ", dst); }
  void recv(Tensor&, int src, int) override { no_peers("recv", " from rank ", src); }
  std::unique_ptr<Pending> start_send(const Tensor&, int dst, int) override {
    no_peers("send", " to rank ", dst);
    return nullptr;
  }
  std::unique_ptr<Pending> start_recv(Tensor&, int src, int) override {
    no_peers("recv", " from rank ", src);
    return nullptr;
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
  struct Done final : Pending {
    void wait() override {}
  };
  [[noreturn]] static void no_peers(const char* call, const char* dir, int peer) {
    TITAN_FAIL("[comm] ", call, dir, peer, ": the local communicator is one process (rank 0 of 1) with no peers",
               ". HINT: point-to-point transfers need a multi-rank run (mpirun -np N with an MPI build)");
  }
  static void copy(const float* in, float* out, int64_t n) {
    if (in != out && n > 0) std::memcpy(out, in, static_cast<size_t>(n) * sizeof(float));
  }
};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  TITAN_CHECK(end != v && *end == '\0' && x >= 0, "[parallel] environment variable ", name, "='", v,
              "' is not a rank count");
  return static_cast<int>(x);
}

}  // namespace

void Comm::all_reduce_sum(Tensor& t) {
  check_host(*this, "all_reduce_sum", "t", t);
  if (t.is_meta()) return;
  switch (t.dtype()) {
    case DType::f32: return all_reduce_sum(t.data<float>(), t.numel());
    case DType::f64: return all_reduce_sum(t.data<double>(), t.numel());
    case DType::i64: return all_reduce_sum(t.data<int64_t>(), t.numel());
    default: break;
  }
  TITAN_FAIL("[comm] all_reduce_sum t: expected f32, f64 or i64, got ", found(t),
             ". HINT: sum bf16/f16 values in f32 (to(DType::f32)), i32 counts in i64");
}

void Comm::all_reduce_max(Tensor& t) {
  check_host(*this, "all_reduce_max", "t", t);
  TITAN_CHECK(t.dtype() == DType::f64, "[comm] all_reduce_max t: expected f64, got ", found(t));
  if (t.is_meta()) return;
  all_reduce_max(t.data<double>(), t.numel());
}

void Comm::all_gather(const Tensor& in, Tensor& out) {
  check_f32(*this, "all_gather", "in", in);
  check_f32(*this, "all_gather", "out", out);
  check_whole(*this, "all_gather", "out", out, "in", in);
  if (on_meta("all_gather", in, out)) return;
  all_gather(in.data<float>(), out.data<float>(), in.numel());
}

std::unique_ptr<Pending> Comm::start_all_gather(const Tensor& in, Tensor& out) {
  auto p = std::make_unique<TensorPending>();
  p->in = in;
  p->out = out;
  if (in.dtype() == DType::bf16) {
    // A gather only moves bytes: an even count of bf16 elements travels as half as many f32 slots
    // (no arithmetic touches them, so any bit pattern arrives intact). FSDP's bf16 parameter
    // gather (half the traffic) pads its shards to an even length for this.
    check_host(*this, "start_all_gather", "in", in);
    check_host(*this, "start_all_gather", "out", out);
    TITAN_CHECK(out.dtype() == DType::bf16 && in.numel() % 2 == 0, "[comm] start_all_gather: bf16 needs bf16 in "
                "and out and an even element count per rank, got in ", found(in), ", out ", found(out));
    check_whole(*this, "start_all_gather", "out", out, "in", in);
    if (on_meta("start_all_gather", in, out)) return std::make_unique<MetaPending>();
    p->inner = start_all_gather(reinterpret_cast<const float*>(in.data<uint16_t>()),
                                reinterpret_cast<float*>(out.data<uint16_t>()), in.numel() / 2);
    return p;
  }
  check_f32(*this, "start_all_gather", "in", in);
  check_f32(*this, "start_all_gather", "out", out);
  check_whole(*this, "start_all_gather", "out", out, "in", in);
  if (on_meta("start_all_gather", in, out)) return std::make_unique<MetaPending>();
  p->inner = start_all_gather(in.data<float>(), out.data<float>(), in.numel());
  return p;
}

void Comm::reduce_scatter_sum(const Tensor& in, Tensor& out) {
  if (in.dtype() == DType::bf16) {
    check_host(*this, "reduce_scatter_sum", "in", in);
    check_host(*this, "reduce_scatter_sum", "out", out);
    TITAN_CHECK(out.dtype() == DType::bf16, "[comm] reduce_scatter_sum out: expected bf16 like in, got ", found(out));
    check_whole(*this, "reduce_scatter_sum", "in", in, "out", out);
    if (on_meta("reduce_scatter_sum", in, out)) return;
    reduce_scatter_sum(in.data<uint16_t>(), out.data<uint16_t>(), out.numel());
    return;
  }
  check_f32(*this, "reduce_scatter_sum", "in", in);
  check_f32(*this, "reduce_scatter_sum", "out", out);
  check_whole(*this, "reduce_scatter_sum", "in", in, "out", out);
  if (on_meta("reduce_scatter_sum", in, out)) return;
  reduce_scatter_sum(in.data<float>(), out.data<float>(), out.numel());
}

// One count per rank, none negative, summing to `t`'s elements.
static void check_counts(const Comm& comm, const char* what, const std::vector<int64_t>& counts, const Tensor& t) {
  TITAN_CHECK(static_cast<int64_t>(counts.size()) == comm.size(), "[comm] all_to_all_v ", what, ": expected ",
              comm.size(), " counts (one per rank), got ", counts.size());
  int64_t total = 0;
  for (int64_t c : counts) {
    TITAN_CHECK(c >= 0, "[comm] all_to_all_v ", what, ": a count is negative (", c, ")");
    total += c;
  }
  TITAN_CHECK(total == t.numel(), "[comm] all_to_all_v ", what, ": the counts sum to ", total, " elements but the "
              "tensor is ", t.describe(), ". HINT: size the tensor to the counts (exchange them first with all_to_all)");
}

void Comm::all_to_all_v(const Tensor& in, const std::vector<int64_t>& send_counts, Tensor& out,
                        const std::vector<int64_t>& recv_counts) {
  check_f32(*this, "all_to_all_v", "in", in);
  check_f32(*this, "all_to_all_v", "out", out);
  check_counts(*this, "send_counts", send_counts, in);
  check_counts(*this, "recv_counts", recv_counts, out);
  if (on_meta("all_to_all_v", in, out)) return;
  all_to_all_v(in.data<float>(), send_counts.data(), out.data<float>(), recv_counts.data());
}

void Comm::all_to_all(const Tensor& in, Tensor& out) {
  check_host(*this, "all_to_all", "in", in);
  check_host(*this, "all_to_all", "out", out);
  TITAN_CHECK(in.dtype() == DType::i64 && out.dtype() == DType::i64, "[comm] all_to_all: expected i64 in and out, "
              "got in ", found(in), ", out ", found(out), ". HINT: it exchanges counts");
  TITAN_CHECK(in.numel() == out.numel() && in.numel() % size() == 0, "[comm] all_to_all: expected in and out of one "
              "size, a multiple of ", size(), " ranks, got in ", found(in), ", out ", found(out));
  if (on_meta("all_to_all", in, out)) return;
  all_to_all(in.data<int64_t>(), out.data<int64_t>(), in.numel() / size());
}

void Comm::broadcast(Tensor& t, int root) {
  check_host(*this, "broadcast", "t", t);
  TITAN_CHECK(root >= 0 && root < size(), "[comm] broadcast from rank ", root, ": not a rank of this ", size(),
              "-rank ", backend(), " communicator");
  if (t.is_meta()) return;
  broadcast(t.raw_data(), static_cast<int64_t>(t.nbytes()), root);
}

void Comm::all_reduce_sum(std::span<double> x) {
  if (x.empty()) return;
  Tensor t = Tensor::wrap(x.data(), {static_cast<int64_t>(x.size())}, DType::f64, nullptr);
  all_reduce_sum(t);
}

void Comm::all_reduce_sum(std::span<int64_t> x) {
  if (x.empty()) return;
  Tensor t = Tensor::wrap(x.data(), {static_cast<int64_t>(x.size())}, DType::i64, nullptr);
  all_reduce_sum(t);
}

void Comm::all_reduce_max(std::span<double> x) {
  if (x.empty()) return;
  Tensor t = Tensor::wrap(x.data(), {static_cast<int64_t>(x.size())}, DType::f64, nullptr);
  all_reduce_max(t);
}

void Comm::check_point_to_point(const char* call, const Tensor& t, int peer, int tag) const {
  const char* dir = std::string_view(call) == "send" ? " to rank " : " from rank ";
  TITAN_CHECK(peer >= 0 && peer < size(), "[comm] ", call, dir, peer, ": not a rank of this ", size(), "-rank ",
              backend(), " communicator (ranks 0..", size() - 1, ")");
  TITAN_CHECK(peer != rank(), "[comm] ", call, dir, peer, ": that is this rank; a blocking ", call,
              " to itself never completes. HINT: copy the tensor instead");
  TITAN_CHECK(tag >= 0, "[comm] ", call, dir, peer, ": tag ", tag, " is negative. HINT: tags are >= 0");
  check_host(*this, call, "t", t);
}

std::unique_ptr<Comm> Comm::split_group(int color, int key, int size) {
  std::unique_ptr<Comm> group = split(color, key);
  TITAN_CHECK(group->size() == size && group->rank() == key, "[parallel] split(color ", color, ", key ", key,
              ") made rank ", group->rank(), " of ", group->size(), ", expected ", key, " of ", size,
              " (internal: the mesh's coordinates disagree with the communicator)");
  return group;
}

namespace {

// A simulated rank: argument checks only (the Tensor forms skip meta tensors before these run; host
// values stay this rank's own).
class MetaComm final : public Comm {
 public:
  MetaComm(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "meta"; }
  void all_reduce_sum(float*, int64_t) override {}
  void all_reduce_sum(double*, int64_t) override {}
  void all_reduce_sum(int64_t*, int64_t) override {}
  void all_reduce_max(double*, int64_t) override {}
  void all_gather(const float*, float*, int64_t) override {}
  std::unique_ptr<Pending> start_all_gather(const float*, float*, int64_t) override {
    return std::make_unique<MetaPending>();
  }
  void reduce_scatter_sum(const float*, float*, int64_t) override {}
  void reduce_scatter_sum(const uint16_t*, uint16_t*, int64_t) override {}
  void all_to_all_v(const float*, const int64_t*, float*, const int64_t*) override {}
  void all_to_all(const int64_t*, int64_t*, int64_t) override {}
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
  std::unique_ptr<Comm> split(int color, int key) override {
    TITAN_FAIL("[comm] split(color ", color, ", key ", key, ") of a simulated rank: it has no other ranks to ask "
               "(internal: use split_group)");
  }
  std::unique_ptr<Comm> split_group(int, int key, int size) override { return std::make_unique<MetaComm>(key, size); }
  void send(const Tensor& t, int dst, int tag) override { check_point_to_point("send", t, dst, tag); }
  void recv(Tensor& t, int src, int tag) override { check_point_to_point("recv", t, src, tag); }
  std::unique_ptr<Pending> start_send(const Tensor& t, int dst, int tag) override {
    check_point_to_point("send", t, dst, tag);
    return std::make_unique<MetaPending>();
  }
  std::unique_ptr<Pending> start_recv(Tensor& t, int src, int tag) override {
    check_point_to_point("recv", t, src, tag);
    return std::make_unique<MetaPending>();
  }
  using Comm::all_gather;
  using Comm::all_reduce_max;
  using Comm::all_reduce_sum;
  using Comm::all_to_all;
  using Comm::all_to_all_v;
  using Comm::reduce_scatter_sum;
  using Comm::start_all_gather;

 private:
  int rank_, size_;
};

}  // namespace

std::unique_ptr<Comm> make_local_comm() { return std::make_unique<LocalComm>(); }
std::unique_ptr<Comm> make_meta_comm(int rank, int size) { return std::make_unique<MetaComm>(rank, size); }

LaunchInfo launch_info() {
  // OpenMPI's mpirun, then PMI (MPICH, Slurm's srun --mpi=pmi2).
  LaunchInfo info;
  for (const auto& [world, rank, local, local_world] :
       {std::array<const char*, 4>{"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                   "OMPI_COMM_WORLD_LOCAL_SIZE"},
        std::array<const char*, 4>{"PMI_SIZE", "PMI_RANK", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"}}) {
    if (std::getenv(world) == nullptr) continue;
    info.under_mpi = true;
    info.world = env_int(world, 1);
    info.rank = env_int(rank, 0);
    info.local_rank = env_int(local, info.rank);
    info.local_world = env_int(local_world, info.world);
    TITAN_CHECK(info.world >= 1 && info.rank < info.world, "[parallel] ", rank, "=", info.rank, " is not below ",
                world, "=", info.world);
    return info;
  }
  return info;
}

void record_launch_error(int rank, int code, const std::string& line) {
  const char* dir = std::getenv("TITAN_LAUNCH_ERRORS");
  if (dir == nullptr) return;
  if (std::FILE* f = std::fopen(str(dir, "/rank", rank, ".error").c_str(), "w")) {
    std::fprintf(f, "%d\n%s\n", code, line.c_str());
    std::fclose(f);
  }
}

}  // namespace titan::parallel
