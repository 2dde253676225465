// Running the `titan` binary from a test, as a user does, and a scratch folder per test.
// TITAN_BINARY is the binary's path (set by tests/CMakeLists.txt).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

extern char** environ;

namespace titan::testing {

struct CommandResult {
  int exit_code;
  std::string output;  // stdout, plus stderr when asked
};

// A shell command line's exit code and output.
inline CommandResult run_command(const std::string& cmd) {
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

inline CommandResult run_titan(const std::string& args, bool with_stderr = true) {
  return run_command(std::string(TITAN_BINARY) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null"));
}

// Starts `titan <args>` without waiting, stdout and stderr to `log`; with `own_group` in a process
// group of its own, as a shell starts a job (so a signal to that group reaches only the job).
// Returns its pid, or -1.
inline pid_t spawn_titan(const std::string& args, const std::filesystem::path& log, bool own_group = false) {
  std::vector<std::string> words = {TITAN_BINARY};
  std::istringstream is(args);
  for (std::string w; is >> w;) words.push_back(w);
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (own_group) {
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
  }
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -1;
}

// An empty folder unique to this process: <tmp>/titan_cli_<name>_<pid>.
inline std::filesystem::path scratch_dir(const std::string& name) {
  std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("titan_cli_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

// The real English corpus beside the checkout (tests may read ../shared; the product never does).
inline const std::filesystem::path kShakespeare =
    std::filesystem::path(TITAN_SOURCE_DIR) / "../shared/assets/text/tinyshakespeare.txt";

// A whole file as bytes ("" when it cannot be opened; the comparison that follows then fails).
inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// One JSON value per line (metrics.jsonl).
inline std::vector<nlohmann::json> read_jsonl(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);) rows.push_back(nlohmann::json::parse(line));
  return rows;
}

// The fixture of the tests that run `titan train` on bad setups: a scratch folder per test
// (<prefix><test name>) holding a copy of the trained tokenizer in tok/ (a copy: a test that failed
// could otherwise delete a folder of the source tree), and one step of a one-layer debug model.
class ScratchRunTest : public ::testing::Test {
 protected:
  explicit ScratchRunTest(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    dir_ = scratch_dir(prefix_ + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_ / "tok");
    std::filesystem::copy_file(std::filesystem::path(TITAN_SOURCE_DIR) / "tests/fixtures/tokenizer/trained/tokenizer.json",
                               dir_ / "tok" / "tokenizer.json");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // One step of a one-layer debug model into dir_/dump on tinyshakespeare, extra flags appended.
  CommandResult train(const std::string& dump, const std::string& extra) const {
    return run_titan("train --config qwen3_debug --model.n_layers 1 --training.steps 1 --training.seq_len 32 "
                     "--training.local_batch_size 1 --metrics.peak_tflops 1 --job.dump_folder " +
                     (dir_ / dump).string() + " --model.hf_assets_path " + (dir_ / "tok").string() +
                     " --training.dataset_path " + kShakespeare.string() + " " + extra);
  }

  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace titan::testing
