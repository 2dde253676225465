// A build without MPI (no libopenmpi-dev found, or -DTITAN_MPI=OFF): single-process runs only; a
// process started by mpirun says how to get the MPI communicator instead of training alone.
#include "titan/core/error.h"
#include "titan/parallel/comm.h"

namespace titan::parallel {

bool mpi_available() { return false; }

Comm& world_comm() {
  static std::unique_ptr<Comm> world;
  if (world) return *world;
  const LaunchInfo info = launch_info();
  TITAN_CHECK(!info.under_mpi || info.world == 1, "[parallel] started as rank ", info.rank, " of ", info.world,
              " by an MPI launcher, but this titan was built without MPI. HINT: apt-get install libopenmpi-dev "
              "and rebuild (cmake -DTITAN_MPI=ON)");
  world = make_local_comm();
  return *world;
}

void abort_world(int) {}

void set_collective_timeout(double) {}

}  // namespace titan::parallel
