#include "titan/core/parallel.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "titan/core/openmp_env.h"

namespace titan {

int num_threads() { return omp_get_max_threads(); }
void set_num_threads(int n) { omp_set_num_threads(n); }

int cgroup_quota_cpus(const std::string& quota, const std::string& period) {
  char* end = nullptr;
  const double q = std::strtod(quota.c_str(), &end);
  if (end == quota.c_str() || !(q > 0)) return 0;  // "max" (v2) or -1 (v1): no quota
  const double p = std::strtod(period.c_str(), &end);
  if (end == period.c_str() || !(p > 0)) return 0;
  return static_cast<int>(std::max(1.0, std::ceil(q / p)));
}

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

// The tightest quota on the way from this process's cgroup up to the root (a parent's quota
// binds its children too); 0 when there is none. cgroup v2 (cpu.max "quota period") and v1 (the
// cpu controller's cpu.cfs_quota_us / cpu.cfs_period_us).
int cgroup_cpu_limit() {
  std::istringstream lines(read_text("/proc/self/cgroup"));
  int limit = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    const bool v2 = line.compare(0, a, "0") == 0 && controllers.empty();
    const bool v1 = (',' + controllers + ',').find(",cpu,") != std::string::npos;
    if (!v2 && !v1) continue;
    const std::string root = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/" + controllers;
    for (;;) {
      int cpus = 0;
      if (v2) {
        std::istringstream max(read_text(root + path + "/cpu.max"));
        std::string quota, period;
        if (max >> quota >> period) cpus = cgroup_quota_cpus(quota, period);
      } else {
        std::string quota = read_text(root + path + "/cpu.cfs_quota_us");
        std::string period = read_text(root + path + "/cpu.cfs_period_us");
        cpus = cgroup_quota_cpus(quota, period);
      }
      if (cpus > 0) limit = limit == 0 ? cpus : std::min(limit, cpus);
      if (path.empty() || path == "/") break;
      const size_t slash = path.rfind('/');
      path = path.substr(0, slash);
    }
  }
  return limit;
}

}  // namespace

ThreadDefault default_num_threads() {
  ThreadDefault d;
  // The CPUs of this process's affinity mask (libgomp's default thread count), whatever the
  // thread count is now (OMP_NUM_THREADS, or apply_default_num_threads' cap).
  d.cpus = omp_get_num_procs();
  d.cgroup_cpus = cgroup_cpu_limit();
  d.threads = d.cgroup_cpus > 0 ? std::min(d.cpus, d.cgroup_cpus) : d.cpus;
  return d;
}

void reexec_with_openmp_wait_default(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (::setenv("GOMP_SPINCOUNT", kOpenmpSpinCount, 1) != 0 || ::setenv("TITAN_OPENMP_WAIT", "default", 1) != 0) return;
  ::execv("/proc/self/exe", argv);
  ::unsetenv("GOMP_SPINCOUNT");  // no exec: this process keeps libgomp's default; say so in the log
  ::unsetenv("TITAN_OPENMP_WAIT");
}

bool openmp_wait_is_titan_default() {
  const char* marker = std::getenv("TITAN_OPENMP_WAIT");
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  return marker != nullptr && spin != nullptr && std::string(marker) == "default" &&
         std::string(spin) == kOpenmpSpinCount;
}

void apply_default_num_threads() {
  if (std::getenv("OMP_NUM_THREADS") != nullptr) return;  // the user's choice
  const ThreadDefault d = default_num_threads();
  if (d.threads != d.cpus) set_num_threads(d.threads);
}

}  // namespace titan
