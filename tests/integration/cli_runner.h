// Running the `titan` binary from a test, as a user does, and a scratch folder per test.
// TITAN_BINARY is the binary's path (set by tests/CMakeLists.txt).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace titan::testing {

struct CommandResult {
  int exit_code;
  std::string output;  // stdout, plus stderr when asked
};

inline CommandResult run_titan(const std::string& args, bool with_stderr = true) {
  const std::string cmd = std::string(TITAN_BINARY) + " " + args + (with_stderr ? " 2>&1" : " 2>/dev/null");
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), pipe)) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// An empty folder unique to this process: <tmp>/titan_cli_<name>_<pid>.
inline std::filesystem::path scratch_dir(const std::string& name) {
  std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("titan_cli_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

}  // namespace titan::testing
