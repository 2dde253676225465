// Runs comm_p2p (comm_p2p_main.cpp: send/recv and the Tensor collectives on 2 ranks, checked
// against formulas) under mpirun -np 2, as cli_parallel_test.cpp runs titan. TITAN_COMM_P2P is
// the executable's path, TITAN_MPIRUN the mpirun CMake found.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "integration/cli_runner.h"

namespace titan {
namespace {

TEST(CommP2p, TwoRanksSendRecvAndReduceTensors) {
  // timeout: a rank stuck in a transfer fails the test instead of hanging ctest.
  const std::string cmd = "timeout 120 " + std::string(TITAN_MPIRUN) + " -np 2 --oversubscribe" +
                          (::geteuid() == 0 ? " --allow-run-as-root" : "") +
                          " --bind-to none -x OMP_NUM_THREADS=1 -x ASAN_OPTIONS=detect_leaks=0 " + TITAN_COMM_P2P +
                          " 2>&1";
  const testing::CommandResult r = testing::run_command(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("[comm_p2p] all checks passed on 2 ranks"), std::string::npos) << r.output;
  for (const char* rank : {"[comm_p2p] rank 0: ", "[comm_p2p] rank 1: "}) {
    EXPECT_NE(r.output.find(rank), std::string::npos) << rank << "\n" << r.output;
  }
  EXPECT_EQ(r.output.find("FAILED"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace titan
