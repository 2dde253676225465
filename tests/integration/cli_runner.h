// Running the `titan` binary from a test, as a user does, and a scratch folder per test.
// TITAN_BINARY is the binary's path (set by tests/CMakeLists.txt).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

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

}  // namespace titan::testing
