// The thread count titan starts with (core/parallel.h): a cgroup quota's CPUs from the files' text
// as the kernel writes it (v2 cpu.max "quota period", v1 cpu.cfs_quota_us / cpu.cfs_period_us).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "titan/core/parallel.h"

namespace titan {
namespace {

TEST(Threads, CgroupQuotaAsCpus) {
  EXPECT_EQ(cgroup_quota_cpus("200000", "100000"), 2);
  EXPECT_EQ(cgroup_quota_cpus("150000", "100000"), 2);  // 1.5 CPUs: two threads, as Go and .NET round
  EXPECT_EQ(cgroup_quota_cpus("50000", "100000"), 1);
  EXPECT_EQ(cgroup_quota_cpus("max", "100000"), 0);   // cgroup v2: no quota
  EXPECT_EQ(cgroup_quota_cpus("-1\n", "100000\n"), 0);  // cgroup v1: no quota
  EXPECT_EQ(cgroup_quota_cpus("", ""), 0);              // unreadable
  const ThreadDefault d = default_num_threads();
  EXPECT_GE(d.cpus, 1);
  EXPECT_EQ(d.threads, d.cgroup_cpus > 0 ? std::min(d.cpus, d.cgroup_cpus) : d.cpus);
}

}  // namespace
}  // namespace titan
