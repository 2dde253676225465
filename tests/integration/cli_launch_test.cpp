// titan launch and the signals a user sends it: SIGTERM / SIGINT to launch (or Ctrl-C, SIGINT to
// its whole process group) stop the ranks together after their step, and launch returns 143 / 130
// only once they have ended; launch killed by SIGKILL takes its job with it (no rank trains on
// headless, holding the run lock).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "integration/cli_runner.h"
#include "titan/core/error.h"

extern char** environ;

namespace titan {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::kShakespeare;
using testing::read_jsonl;
using testing::read_text;
using testing::run_titan;
using testing::scratch_dir;

// The pids of live processes (not zombies: their cmdline is empty) whose command line holds
// `marker`: the job's ranks and mpirun, found by the dump folder in their arguments.
std::vector<pid_t> processes_with(const std::string& marker) {
  std::vector<pid_t> pids;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    if (read_text(e.path() / "cmdline").find(marker) != std::string::npos) pids.push_back(pid);
  }
  return pids;
}

// Waits (up to 60 s) until no process of the job is left; kills what is left then, so a failing
// test does not leave a job training.
bool job_gone(const std::string& marker) {
  for (int i = 0; i < 600 && !processes_with(marker).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const std::vector<pid_t> left = processes_with(marker);
  for (const pid_t pid : left) ::kill(pid, SIGKILL);
  return left.empty();
}

// waitpid with a bound (120 s): false if `pid` still runs then (it is killed, with its group).
bool wait_bounded(pid_t pid, int* status) {
  for (int i = 0; i < 1200; ++i) {
    if (::waitpid(pid, status, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, status, 0);
  return false;
}

class CliLaunch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("ASAN_OPTIONS", "detect_leaks=0", 1);  // OpenMPI's allocations are not ours (cli_parallel_test)
    dir_ = scratch_dir("launch");
    const CommandResult r = run_titan("train-tokenizer --input " + kShakespeare.string() + " --vocab-size 512 --out " +
                                      (dir_ / "tok").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // A 1-layer debug model on 2 ranks, training "forever" (until a signal) with a checkpoint every step.
  static std::string launch_args(const std::string& name) {
    return "launch --nproc-per-node 2 -- train --config qwen3_debug --model.n_layers 1 --training.seq_len 32 "
           "--training.local_batch_size 2 --training.steps 100000 --metrics.log_freq 1 --checkpoint.enable "
           "--checkpoint.interval 1 --checkpoint.keep_latest_k 2 --job.dump_folder " + (dir_ / name).string() +
           " --model.hf_assets_path " + (dir_ / "tok").string() + " --training.dataset_path " + kShakespeare.string();
  }

  // titan <args> in a process group of its own (as a shell's job is), output to `log`.
  static pid_t spawn_job(const std::string& args, const fs::path& log) {
    return testing::spawn_titan(args, log, /*own_group=*/true);
  }

  // Waits until the job's metrics hold `rows` steps (up to 120 s).
  static bool wait_for_steps(const fs::path& dump, size_t rows) {
    const fs::path metrics = dump / "metrics.jsonl";
    for (int i = 0; i < 1200; ++i) {
      if (fs::exists(metrics) && read_text(metrics).find("\"step\":" + std::to_string(rows) + ",") != std::string::npos) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // Starts a job, sends `signal` to launch (or to its process group), and checks: launch exits
  // 128 + signal, only after every rank has ended; rank 0 names the step they stopped after, the
  // metrics end there and that step's checkpoint is written.
  static void expect_stop_on(int signal, bool whole_group, const std::string& name) {
    const fs::path dump = dir_ / name, log = dir_ / (name + ".log");
    const pid_t launcher = spawn_job(launch_args(name), log);
    ASSERT_GT(launcher, 0);
    const bool started = wait_for_steps(dump, 2);
    ASSERT_EQ(::kill(whole_group ? -launcher : launcher, started ? signal : SIGKILL), 0);
    int status = 0;
    const bool returned = wait_bounded(launcher, &status);
    const std::vector<pid_t> left = processes_with(dump.string());  // at launch's return
    const bool gone = job_gone(dump.string());
    const std::string out = read_text(log);
    ASSERT_TRUE(started) << out;
    ASSERT_TRUE(returned) << "launch was still running 120 s after the signal\n" << out;
    EXPECT_TRUE(left.empty()) << "launch returned while " << left.size() << " processes of its job ran on\n" << out;
    EXPECT_TRUE(gone) << out;
    ASSERT_TRUE(WIFEXITED(status)) << out;
    EXPECT_EQ(WEXITSTATUS(status), 128 + signal) << out;
    const std::vector<nlohmann::json> rows = read_jsonl(dump / "metrics.jsonl");  // throws on a torn row
    ASSERT_FALSE(rows.empty());
    const int64_t last = rows.back()["step"].get<int64_t>();
    EXPECT_NE(out.find(titan::str("titan: stopped by ", signal == SIGTERM ? "SIGTERM" : "SIGINT", " after step ", last,
                           " of 100000")),
              std::string::npos)
        << out;
    // A checkpoint folder appears by rename once complete: step-<last> is the stop step's, whole.
    EXPECT_TRUE(fs::is_directory(dump / "checkpoint" / ("step-" + std::to_string(last)))) << out;
    EXPECT_EQ(out.find("the job failed"), std::string::npos) << out;
  }

  static fs::path dir_;
};
fs::path CliLaunch::dir_;

TEST_F(CliLaunch, SigtermToLaunchStopsTheRanksAfterTheirStep) { expect_stop_on(SIGTERM, false, "term"); }

TEST_F(CliLaunch, SigintToLaunchStopsTheRanksAfterTheirStep) { expect_stop_on(SIGINT, false, "int"); }

// Ctrl-C in a terminal: SIGINT to launch's whole process group.
TEST_F(CliLaunch, CtrlCStopsTheRanksAndLaunchOutlivesThem) { expect_stop_on(SIGINT, true, "ctrl_c"); }

// kill -9 of launch: within seconds no process of the job is left, and the dump folder's lock is
// free again (a new run on it starts and trains).
TEST_F(CliLaunch, KilledLaunchTakesItsJobWithIt) {
  const fs::path dump = dir_ / "kill9", log = dir_ / "kill9.log";
  const pid_t launcher = spawn_job(launch_args("kill9"), log);
  ASSERT_GT(launcher, 0);
  const bool started = wait_for_steps(dump, 2);
  ASSERT_EQ(::kill(launcher, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(started) << read_text(log);
  const auto killed = std::chrono::steady_clock::now();
  EXPECT_TRUE(job_gone(dump.string())) << "the job trained on without its launcher\n" << read_text(log);
  std::printf("the job ended %.2f s after launch was killed\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count());
  const CommandResult again = run_titan(
      "train --config qwen3_debug --model.n_layers 1 --training.seq_len 32 --training.local_batch_size 4 "
      "--training.steps 1 --job.dump_folder " + dump.string() + " --model.hf_assets_path " + (dir_ / "tok").string() +
      " --training.dataset_path " + kShakespeare.string());
  EXPECT_EQ(again.exit_code, 0) << again.output;
}

}  // namespace
}  // namespace titan
