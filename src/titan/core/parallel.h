// Threading: OpenMP, the same runtime oneDNN uses, so our loops and its GEMMs share one pool
// and never oversubscribe the cores.
#pragma once

#include <cstdint>
#include <string>

namespace titan {

int num_threads();
void set_num_threads(int n);

// The thread count titan starts with when OMP_NUM_THREADS is unset: the CPUs this process may use
// (its affinity mask, as libgomp counts them), capped by a cgroup CPU quota (a container's
// --cpus 2 on a 64-core host), which libgomp does not read: more threads than the quota grants
// are descheduled in turn, and every barrier waits for the slowest.
struct ThreadDefault {
  int cpus = 0;         // the affinity mask's CPUs
  int cgroup_cpus = 0;  // ceil(quota / period) of the tightest cgroup CPU quota; 0: none
  int threads = 0;      // min of the two
};
ThreadDefault default_num_threads();
// Sets the thread count to default_num_threads() unless OMP_NUM_THREADS is set. Once, at start.
void apply_default_num_threads();
// A cgroup quota as CPUs: ceil(quota / period), at least 1; 0 for "max", -1 or unreadable text.
int cgroup_quota_cpus(const std::string& quota, const std::string& period);

// Calls fn(begin, end) over [0, n) split into contiguous chunks of at least `grain` items,
// one chunk per thread. Runs inline when n is small or already inside a parallel region.
template <class Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn);

// Calls fn(i) for each i in [0, n), handing items to threads dynamically (for uneven work
// such as causal attention tiles).
template <class Fn>
void parallel_for_each_dynamic(int64_t n, Fn&& fn);

}  // namespace titan

#include <omp.h>

#include <algorithm>

namespace titan {

template <class Fn>
void parallel_for(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  const int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(1, grain));
  const int threads = static_cast<int>(std::min<int64_t>(num_threads(), max_chunks));
  if (threads <= 1 || omp_in_parallel()) {
    fn(int64_t{0}, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t begin = n * t / nt;
    const int64_t end = n * (t + 1) / nt;
    if (begin < end) fn(begin, end);
  }
}

}  // namespace titan

namespace titan {

template <class Fn>
void parallel_for_each_dynamic(int64_t n, Fn&& fn) {
  if (n <= 0) return;
  if (n == 1 || num_threads() <= 1 || omp_in_parallel()) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) fn(i);
}

}  // namespace titan
