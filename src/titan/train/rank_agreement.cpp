#include "titan/train/rank_agreement.h"

#include <sstream>
#include <string>
#include <vector>

#include "titan/config/config_error.h"
#include "titan/config/overrides.h"
#include "titan/core/abbreviate.h"
#include "titan/data/dataset.h"
#include "titan/data/loader.h"

namespace titan::train {
namespace {

// "[section]" headers and "key = value" lines, each value line keyed by its dotted path.
std::vector<std::pair<std::string, std::string>> keyed_lines(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(text);
  std::string section;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) {
      out.emplace_back(line, "");
    } else {
      out.emplace_back((section.empty() ? "" : section + ".") + line.substr(0, eq), line.substr(eq + 3));
    }
  }
  return out;
}

std::string job_text(const config::JobConfig& c) {
  std::string text = config::to_toml(c);
  if (!c.training.dataset_path.empty()) {
    data::DatasetConfig d;
    d.path = c.training.dataset_path;
    const data::DocumentSource source(d);
    text += "\n[data]\nfiles = " + data::dataset_identity(source.files(), c.training.dataset_format) + "\n";
  }
  return text;
}

}  // namespace

std::string first_difference(const std::string& mine, const std::string& rank0) {
  const auto a = keyed_lines(mine), b = keyed_lines(rank0);
  for (size_t i = 0; i < a.size() || i < b.size(); ++i) {
    if (i < a.size() && i < b.size() && a[i] == b[i]) continue;
    if (i < a.size() && i < b.size() && a[i].first == b[i].first) {
      return str(a[i].first, ": ", abbreviate(a[i].second), " here, ", abbreviate(b[i].second), " on rank 0");
    }
    return str(i < a.size() ? a[i].first : b[i].first, ": present on one rank only");
  }
  return "";
}

void check_ranks_agree(parallel::Comm& world, const config::JobConfig& c) {
  if (world.size() == 1) return;
  const std::string mine = job_text(c);
  const std::string rank0 = world.broadcast_string(mine, 0);
  const std::string difference = mine == rank0 ? "" : first_difference(mine, rank0);
  int64_t differing = mine == rank0 ? 0 : 1;
  world.all_reduce_sum(std::span<int64_t>(&differing, 1));
  if (mine != rank0) {
    config::config_fail("this rank's job differs from rank 0's (", difference.empty() ? "the config's text" : difference,
                        "); every rank must run the same config and read the same data. HINT: start every rank with "
                        "the same flags and job file, and give each node the same dataset files");
  }
  // Another rank differs: its error (and abort) ends the job; this rank waits for it rather than
  // failing first with a line that names nothing.
  if (differing > 0) world.barrier();
}

}  // namespace titan::train
