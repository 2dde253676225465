// titan launch --hostfile across two hosts, played by two network namespaces on this machine: a
// veth pair joins them (10.77.1.1 and 10.77.1.2), OpenMPI talks TCP over it (btl tcp,self; its
// out-of-band channel too), and tests/integration/netns_rsh.sh stands in for ssh (plm_rsh_agent).
// mpirun runs in host a's namespace; host b's ranks are started by an orted that mpirun reaches
// only through the agent and the veth. Each test makes its own namespaces (names unique to the
// process) and removes them, with whatever still runs in them, in TearDown. Without root or `ip`
// (or where namespaces cannot be made) the tests skip, saying why.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/cli_runner.h"

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::kShakespeare;
using testing::read_jsonl;
using testing::read_text;
using testing::run_command;
using testing::run_titan;
using testing::scratch_dir;

constexpr const char* kHostA = "10.77.1.1";
constexpr const char* kHostB = "10.77.1.2";

class CliMultiHost : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = scratch_dir("multihost");
    const CommandResult r = run_titan("train-tokenizer --input " + kShakespeare.string() + " --vocab-size 512 --out " +
                                      (dir_ / "tok").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ofstream(dir_ / "hosts") << kHostA << " slots=2\n" << kHostB << " slots=2\n";
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // Two namespaces joined by a veth pair, loopback up in each; GTEST_SKIP with the reason when
  // this machine cannot make them.
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "network namespaces need root (ip netns add); this test runs as uid "
                                       << ::geteuid();
    if (run_command("command -v ip").exit_code != 0) GTEST_SKIP() << "no `ip` (iproute2) on PATH";
    static int count = 0;
    const std::string id = std::to_string(::getpid()) + "x" + std::to_string(count++);
    ns_a_ = "titan" + id + "a";
    ns_b_ = "titan" + id + "b";
    veth_b_ = "tvb" + id;  // interface names hold at most 15 characters
    const std::string veth_a = "tva" + id;
    const CommandResult made = run_command(
        "set -e; ip netns add " + ns_a_ + "; ip netns add " + ns_b_ + "; ip link add " + veth_a +
        " type veth peer name " + veth_b_ + "; ip link set " + veth_a + " netns " + ns_a_ + "; ip link set " +
        veth_b_ + " netns " + ns_b_ + "; ip -n " + ns_a_ + " addr add " + kHostA + "/24 dev " + veth_a +
        "; ip -n " + ns_b_ + " addr add " + kHostB + "/24 dev " + veth_b_ + "; for d in " + veth_a + " lo; do ip -n " +
        ns_a_ + " link set $d up; done; for d in " + veth_b_ + " lo; do ip -n " + ns_b_ + " link set $d up; done 2>&1");
    if (made.exit_code != 0) {
      TearDown();
      GTEST_SKIP() << "cannot make two network namespaces joined by a veth pair here: " << made.output;
    }
  }

  // Ends what still runs in the namespaces (a failed test's ranks), then removes them; the veth
  // pair goes with them.
  void TearDown() override {
    for (const std::string& ns : {ns_a_, ns_b_}) {
      if (ns.empty()) continue;
      run_command("for p in $(ip netns pids " + ns + " 2>/dev/null); do kill -9 $p; done; ip netns del " + ns +
                  " 2>/dev/null");
    }
  }

  // The environment that makes OpenMPI use the namespaces: the agent, TCP over the veth subnet only,
  // the map of ranks to hosts printed (to check where they ran), and no busy-polling (4 ranks on
  // a small machine).
  std::string mpi_env(bool show_map) const {
    return std::string("env TITAN_NETNS_HOSTS='") + kHostA + "=" + ns_a_ + " " + kHostB + "=" + ns_b_ + "'" +
           " OMPI_MCA_plm_rsh_agent=" + TITAN_SOURCE_DIR + "/tests/integration/netns_rsh.sh" +
           " OMPI_MCA_btl=tcp,self OMPI_MCA_btl_tcp_if_include=10.77.1.0/24 OMPI_MCA_oob_tcp_if_include=10.77.1.0/24"
           " OMPI_MCA_mpi_yield_when_idle=1 " + (show_map ? "OMPI_MCA_rmaps_base_display_map=1 " : "");
  }

  // `titan launch --hostfile` (2 ranks on each host) started in host a's namespace.
  std::string launch_on_two_hosts(const std::string& train, bool show_map = true) const {
    return mpi_env(show_map) + "ip netns exec " + ns_a_ + " " + TITAN_BINARY + " launch --hostfile " +
           (dir_ / "hosts").string() + " --nproc-per-node 2 -- " + train;
  }

  // A 1-layer debug model, global batch 4 x 32 tokens; `local` rows per rank. No LR decay: the
  // schedule does not depend on training.steps, so a 4-step run is the first part of a 6-step one.
  static std::string train_args(const std::string& name, int local, const std::string& extra) {
    return "train --config qwen3_debug --model.n_layers 1 --training.seq_len 32 --lr_scheduler.warmup_steps 2 "
           "--lr_scheduler.decay_ratio 0 --metrics.log_freq 1 --training.deterministic --training.local_batch_size " +
           std::to_string(local) + " --job.dump_folder " + (dir_ / name).string() + " --model.hf_assets_path " +
           (dir_ / "tok").string() + " --training.dataset_path " + kShakespeare.string() + " " + extra;
  }

  // Losses of `rows` (steps first..first+n-1) against the baseline's, within 1e-5 relative.
  static void expect_losses_near(const std::vector<nlohmann::json>& rows, const std::vector<nlohmann::json>& base,
                                 int64_t first, int64_t n, const std::string& name) {
    int64_t seen = 0;
    for (const nlohmann::json& row : rows) {
      const int64_t step = row["step"].get<int64_t>();
      if (step < first || step >= first + n) continue;
      ++seen;
      ASSERT_LE(static_cast<size_t>(step), base.size());
      const double want = base[step - 1]["loss"].get<double>(), got = row["loss"].get<double>();
      EXPECT_LT(std::abs(got - want) / want, 1e-5) << name << " step " << step << ": " << got << " vs " << want;
    }
    EXPECT_EQ(seen, n) << name;
  }

  std::string ns_a_, ns_b_, veth_b_;
  static fs::path dir_;
};
fs::path CliMultiHost::dir_;

// FSDP over 2 ranks x 2 hosts trains the 1-host losses; its checkpoint (written by ranks of both
// hosts) resumes on one host (2 ranks, no hostfile) and continues with the same losses.
TEST_F(CliMultiHost, FsdpOnTwoHostsTrainsTheOneHostLossesAndResumesOnOne) {
  const CommandResult base = run_titan(train_args("base", 4, "--training.steps 6"));
  ASSERT_EQ(base.exit_code, 0) << base.output;
  const std::vector<nlohmann::json> base_rows = read_jsonl(dir_ / "base" / "metrics.jsonl");
  ASSERT_EQ(base_rows.size(), 6u);

  const std::string ckpt = "--checkpoint.enable --checkpoint.interval 2 --no-checkpoint.last_save_model_only ";
  const CommandResult two = run_command(launch_on_two_hosts(train_args("two", 1, ckpt + "--training.steps 4")) + " 2>&1");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  // mpirun's map: two ranks on each host.
  EXPECT_NE(two.output.find(std::string("Data for node: ") + kHostB + "\tNum slots: 2\tMax slots: 0\tNum procs: 2"),
            std::string::npos)
      << two.output;
  expect_losses_near(read_jsonl(dir_ / "two" / "metrics.jsonl"), base_rows, 1, 4, "2 hosts x 2 ranks");
  ASSERT_TRUE(fs::is_directory(dir_ / "two" / "checkpoint" / "step-4")) << two.output;

  const CommandResult one = run_titan("launch --nproc-per-node 2 -- " + train_args("two", 2, ckpt + "--training.steps 6"));
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("resuming from " + (dir_ / "two" / "checkpoint" / "step-4").string()), std::string::npos)
      << one.output;
  expect_losses_near(read_jsonl(dir_ / "two" / "metrics.jsonl"), base_rows, 5, 2, "resumed on 1 host x 2 ranks");
}

// SIGTERM to launch reaches the ranks of both hosts (relayed through mpirun and host b's daemon):
// all four stop after the same step, that step's checkpoint is written, launch exits 143.
TEST_F(CliMultiHost, SigtermToLaunchStopsTheRanksOfBothHosts) {
  const fs::path dump = dir_ / "term", log = dir_ / "term.log";
  const std::string job = launch_on_two_hosts(
      train_args("term", 1, "--training.steps 100000 --checkpoint.enable --checkpoint.interval 1"), false);
  const CommandResult r = run_command(
      job + " > " + log.string() + " 2>&1 & launch=$!; for i in $(seq 1200); do grep -qs '\"step\":2,' " +
      (dump / "metrics.jsonl").string() + " && break; sleep 0.1; done; kill -TERM $launch; "
      "for i in $(seq 1200); do kill -0 $launch 2>/dev/null || break; sleep 0.1; done; kill -9 $launch 2>/dev/null; "
      "wait $launch; echo $?");
  const std::string out = read_text(log);
  EXPECT_EQ(r.output, "143\n") << out;
  const std::vector<nlohmann::json> rows = read_jsonl(dump / "metrics.jsonl");
  ASSERT_GE(rows.size(), 2u) << out;
  const std::string last = std::to_string(rows.back()["step"].get<int64_t>());
  EXPECT_NE(out.find("titan: stopped by SIGTERM after step " + last + " of 100000"), std::string::npos) << out;
  for (const char* rank : {"[rank2]", "[rank3]"}) {  // host b's ranks trained that step too, and no further
    const std::string line = std::string(rank) + " step:" + std::string(6 - last.size(), ' ') + last;
    EXPECT_NE(out.find(line), std::string::npos) << line << "\n" << out;
    const std::string next = std::to_string(rows.back()["step"].get<int64_t>() + 1);
    EXPECT_EQ(out.find(std::string(rank) + " step:" + std::string(6 - next.size(), ' ') + next), std::string::npos)
        << out;
  }
  EXPECT_TRUE(fs::is_directory(dump / "checkpoint" / ("step-" + last))) << out;
}

// A host that drops off the network (its veth pair deleted mid-run: no TCP reset reaches anyone)
// ends the job within seconds, and the output names that host.
TEST_F(CliMultiHost, AHostThatDropsOffEndsTheJobNamingIt) {
  const fs::path dump = dir_ / "drop", log = dir_ / "drop.log";
  const std::string job = launch_on_two_hosts(train_args("drop", 1, "--training.steps 100000"),
                                              false);
  const CommandResult r = run_command(
      job + " > " + log.string() + " 2>&1 & launch=$!; for i in $(seq 1200); do grep -qs '\"step\":2,' " +
      (dump / "metrics.jsonl").string() + " && break; sleep 0.1; done; ip -n " + ns_b_ + " link del " + veth_b_ +
      "; start=$(date +%s.%N); for i in $(seq 1200); do kill -0 $launch 2>/dev/null || break; sleep 0.1; done; "
      "kill -9 $launch 2>/dev/null; wait $launch; code=$?; echo $code $start $(date +%s.%N)");
  const std::string out = read_text(log);
  int code = 0;
  double start = 0, end = 0;
  ASSERT_EQ(std::sscanf(r.output.c_str(), "%d %lf %lf", &code, &start, &end), 3) << r.output << out;
  const double seconds = end - start;
  std::printf("the job ended %.2f s after host b dropped off (exit code %d)\n", seconds, code);
  ASSERT_GE(read_jsonl(dump / "metrics.jsonl").size(), 2u) << out;
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, 137) << "launch was still running 120 s after the host dropped off\n" << out;
  EXPECT_LT(seconds, 60.0) << out;
  EXPECT_NE(out.find(kHostB), std::string::npos) << "the output names the host that dropped off\n" << out;
  // Host b's side ends too: its daemon loses mpirun the same way and takes its ranks down.
  const CommandResult left = run_command("for i in $(seq 600); do [ -z \"$(ip netns pids " + ns_b_ +
                                         ")\" ] && break; sleep 0.1; done; ip netns pids " + ns_b_ + " | wc -l");
  EXPECT_EQ(left.output, "0\n") << "processes left on host b 60 s after the job ended";
}

}  // namespace
}  // namespace titan
