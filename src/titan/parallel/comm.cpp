#include "titan/parallel/comm.h"

#include <array>
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
  void broadcast(void*, int64_t, int) override {}
  void barrier() override {}
  std::unique_ptr<Comm> split(int, int) override { return std::make_unique<LocalComm>(); }

 private:
  struct Done final : Pending {
    void wait() override {}
  };
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

std::unique_ptr<Comm> make_local_comm() { return std::make_unique<LocalComm>(); }

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

}  // namespace titan::parallel
