// Benchmark harness: time a callable (warm-up, repeats, median/min/max), print aligned table
// rows, and run a peer command (a tools/ Python script, or this binary in a child process) in
// the same invocation, parsing its one `RESULT {json}` line so the two can be put in a ratio.
// Speed is measured here, never asserted by tests.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace titan::bench {

double now_seconds();  // monotonic clock

struct Timing {
  double median_s = 0.0;
  double min_s = 0.0;
  double max_s = 0.0;
  int repeats = 0;
};

// Runs fn `warmup` times untimed, then `repeats` times timed (at least 1).
Timing time_it(const std::function<void()>& fn, int warmup = 1, int repeats = 5);

double median(std::vector<double> values);

// "12.3" with `decimals` digits after the point.
std::string fixed(double value, int decimals = 1);

// A fixed-width text table on stdout. Width < 0 left-aligns the column.
class Table {
 public:
  explicit Table(std::vector<std::pair<std::string, int>> columns) : columns_(std::move(columns)) {}
  void print_header() const;
  void print_row(const std::vector<std::string>& cells) const;

 private:
  std::vector<std::pair<std::string, int>> columns_;
};

struct PeerRun {
  int exit_code = -1;
  std::string output;          // the peer's stdout
  nlohmann::json result;       // parsed from its last `RESULT {json}` line; null if none
  bool ok() const { return exit_code == 0 && !result.is_null(); }
};

// Runs `command` through /bin/sh (stderr passes through to ours), captures stdout and parses the
// last line that starts with "RESULT ". Never throws for a failing peer: check ok().
PeerRun run_peer(const std::string& command);

// Prints "RESULT <json>" on one line (what run_peer parses).
void print_result(const nlohmann::json& result);

// ours / peer; NaN when the peer value is missing or not positive.
double ratio(double ours, double peer);

// Single-quotes a string for /bin/sh.
std::string shell_quote(const std::string& s);

}  // namespace titan::bench
