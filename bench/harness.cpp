#include "harness.h"

#include <stdio.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>

namespace titan::bench {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

Timing time_it(const std::function<void()>& fn, int warmup, int repeats) {
  for (int i = 0; i < warmup; ++i) fn();
  repeats = std::max(1, repeats);
  std::vector<double> times;
  times.reserve(static_cast<size_t>(repeats));
  for (int i = 0; i < repeats; ++i) {
    const double t0 = now_seconds();
    fn();
    times.push_back(now_seconds() - t0);
  }
  Timing t;
  t.median_s = median(times);
  t.min_s = *std::min_element(times.begin(), times.end());
  t.max_s = *std::max_element(times.begin(), times.end());
  t.repeats = repeats;
  return t;
}

std::string fixed(double value, int decimals) {
  if (std::isnan(value)) return "-";
  std::ostringstream os;
  os << std::fixed << std::setprecision(decimals) << value;
  return os.str();
}

static void print_cells(const std::vector<std::pair<std::string, int>>& columns,
                        const std::vector<std::string>& cells) {
  std::ostringstream os;
  for (size_t i = 0; i < columns.size(); ++i) {
    const int width = columns[i].second;
    const std::string cell = i < cells.size() ? cells[i] : "";
    if (i > 0) os << "  ";
    if (width < 0) {
      os << std::left << std::setw(-width) << cell;
    } else {
      os << std::right << std::setw(width) << cell;
    }
  }
  std::string line = os.str();
  line.erase(line.find_last_not_of(' ') + 1);
  std::cout << line << std::endl;
}

void Table::print_header() const {
  std::vector<std::string> names;
  for (const auto& c : columns_) names.push_back(c.first);
  print_cells(columns_, names);
  std::vector<std::string> rules;
  for (const auto& c : columns_) rules.push_back(std::string(static_cast<size_t>(std::abs(c.second)), '-'));
  print_cells(columns_, rules);
}

void Table::print_row(const std::vector<std::string>& cells) const { print_cells(columns_, cells); }

PeerRun run_peer(const std::string& command) {
  PeerRun run;
  std::fflush(stdout);
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t got;
  while ((got = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) run.output.append(buffer, got);
  const int status = ::pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  std::istringstream lines(run.output);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("RESULT ", 0) != 0) continue;
    try {
      run.result = nlohmann::json::parse(line.substr(7));
    } catch (const nlohmann::json::exception&) {
      run.result = nullptr;
    }
  }
  return run;
}

void print_result(const nlohmann::json& result) { std::cout << "RESULT " << result.dump() << std::endl; }

double ratio(double ours, double peer) { return peer > 0.0 ? ours / peer : NAN; }

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (const char ch : s) {
    if (ch == '\'') {
      out += "'\\''";
    } else {
      out += ch;
    }
  }
  return out + "'";
}

}  // namespace titan::bench
