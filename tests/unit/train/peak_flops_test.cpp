// The MFU peak (train/peak_flops.h): per-precision cache keys, a low cached peak replaced when a
// run beats it, MFU never above 100%, the lock between ranks, metrics.peak_tflops winning. Every
// test has its own XDG_CACHE_HOME and measures briefly (kShort); nothing asserts a speed.
#include "titan/train/peak_flops.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "titan/core/error.h"

namespace titan::train {
namespace {

namespace fs = std::filesystem;

const PeakOptions kShort{0.01, 2, 256};

class PeakFlopsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* old = std::getenv("XDG_CACHE_HOME")) saved_ = old;
    dir_ = fs::temp_directory_path() / ("titan_peak_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    ::setenv("XDG_CACHE_HOME", dir_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_.empty()) {
      ::unsetenv("XDG_CACHE_HOME");
    } else {
      ::setenv("XDG_CACHE_HOME", saved_.c_str(), 1);
    }
    fs::remove_all(dir_);
  }
  static nlohmann::json read_cache() {
    std::ifstream in(peak_cache_path());
    return in ? nlohmann::json::parse(in) : nlohmann::json::object();
  }
  static void write_cache(const nlohmann::json& cache) {
    fs::create_directories(peak_cache_path().parent_path());
    std::ofstream(peak_cache_path()) << cache.dump();
  }
  static double cached(Precision p) {
    const nlohmann::json cache = read_cache();
    const std::string key = peak_cache_key(p);
    return cache.contains(key) ? cache[key]["flops"].get<double>() : 0.0;
  }

  fs::path dir_;
  std::string saved_;
};

TEST_F(PeakFlopsTest, CachePathFollowsXdgCacheHome) {
  EXPECT_EQ(peak_cache_path(), dir_ / "titan" / "peak_flops.json");
}

TEST_F(PeakFlopsTest, PrecisionNamesRoundTripAndUnknownIsRefused) {
  for (const Precision p : {Precision::float32, Precision::bfloat16}) EXPECT_EQ(parse_precision(precision_name(p)), p);
  EXPECT_THROW(parse_precision("fp8"), Error);
}

TEST_F(PeakFlopsTest, EachPrecisionHasItsOwnCacheEntry) {
  const std::string fp32 = peak_cache_key(Precision::float32), bf16 = peak_cache_key(Precision::bfloat16);
  EXPECT_NE(fp32, bf16);
  EXPECT_NE(fp32.find("float32"), std::string::npos) << fp32;
  EXPECT_NE(bf16.find("bfloat16"), std::string::npos) << bf16;
  write_cache({{fp32, {{"flops", 111e9}, {"kernel", "test"}}}, {bf16, {{"flops", 222e9}, {"kernel", "test"}}}});
  const PeakFlops a = device_peak_flops(0.0, Precision::float32, kShort);
  const PeakFlops b = device_peak_flops(0.0, Precision::bfloat16, kShort);
  EXPECT_EQ(a.flops, 111e9);
  EXPECT_EQ(b.flops, 222e9);
  EXPECT_EQ(a.precision, Precision::float32);
  EXPECT_EQ(b.precision, Precision::bfloat16);
  EXPECT_NE(a.source.find("cached in " + peak_cache_path().string()), std::string::npos) << a.source;
}

// A fresh measurement of each precision: positive, and if it was cached (only on a quiet machine),
// cached under its own key with the value returned.
TEST_F(PeakFlopsTest, FreshMeasurementOfEachPrecision) {
  for (const Precision p : {Precision::float32, Precision::bfloat16}) {
    const PeakFlops peak = device_peak_flops(0.0, p, kShort);
    EXPECT_GT(peak.flops, 0.0);
    EXPECT_EQ(peak.source.rfind("measured: ", 0), 0u) << peak.source;
    const double c = cached(p);
    if (c > 0.0) {
      EXPECT_EQ(c, peak.flops);
    } else {
      EXPECT_NE(peak.source.find("not cached"), std::string::npos) << peak.source;
    }
  }
}

// The acceptance test of the honest-MFU issue: a deliberately low cached peak (as measured on a
// busy machine) is replaced as soon as a run beats it, and MFU never prints above 100%.
TEST_F(PeakFlopsTest, LowCachedPeakBeatenByTheRunIsReplaced) {
  write_cache({{peak_cache_key(Precision::float32), {{"flops", 1e6}, {"kernel", "stale"}}}});
  PeakFlops peak = device_peak_flops(0.0, Precision::float32, kShort);
  ASSERT_EQ(peak.flops, 1e6);
  // 2 MFLOP/s beats the cached 1 MFLOP/s but not any real FMA loop: re-measured, not raised.
  const double mfu = checked_mfu(2e6, peak, kShort);
  EXPECT_TRUE(peak.remeasured);
  EXPECT_FALSE(peak.raised);
  EXPECT_GT(peak.flops, 2e6);
  EXPECT_LT(mfu, 100.0);
  EXPECT_EQ(cached(Precision::float32), peak.flops) << "the cache keeps the stale peak";
  // A rate no CPU reaches: the peak was already re-measured once, so it is raised and MFU is 100%.
  const double beyond = checked_mfu(1e18, peak, kShort);
  EXPECT_TRUE(peak.raised);
  EXPECT_EQ(beyond, 100.0);
  EXPECT_EQ(peak.flops, 1e18);
  EXPECT_LT(cached(Precision::float32), 1e18) << "an achieved rate is not a kernel measurement; not cached";
  EXPECT_LE(checked_mfu(5e17, peak, kShort), 100.0);
}

TEST_F(PeakFlopsTest, AchievedBelowThePeakChangesNothing) {
  PeakFlops peak{100.0, Precision::bfloat16, "test", false, false, false};
  EXPECT_EQ(checked_mfu(25.0, peak, kShort), 25.0);
  EXPECT_EQ(checked_mfu(100.0, peak, kShort), 100.0);
  EXPECT_FALSE(peak.remeasured);
  EXPECT_EQ(peak.flops, 100.0);
  EXPECT_FALSE(fs::exists(peak_cache_path()));
}

// metrics.peak_tflops wins over the cache; beaten, it is raised (never re-measured: the user chose
// it) and the cache is left alone.
TEST_F(PeakFlopsTest, ConfiguredPeakOverridesAndIsRaisedWhenBeaten) {
  write_cache({{peak_cache_key(Precision::bfloat16), {{"flops", 5e12}, {"kernel", "test"}}}});
  PeakFlops peak = device_peak_flops(2.0, Precision::bfloat16, kShort);
  EXPECT_EQ(peak.flops, 2e12);
  EXPECT_EQ(peak.source, "metrics.peak_tflops");
  EXPECT_EQ(checked_mfu(3e12, peak, kShort), 100.0);
  EXPECT_FALSE(peak.remeasured);
  EXPECT_EQ(cached(Precision::bfloat16), 5e12);
}

// Two ranks started together: the second waits on the lock the first holds while it measures,
// then reads the value the first cached instead of measuring under the first one's load.
TEST_F(PeakFlopsTest, WaitsForTheLockThenReadsTheOtherRanksValue) {
  fs::create_directories(peak_cache_path().parent_path());
  const std::string lock_path = peak_cache_path().string() + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  auto other = std::async(std::launch::async, [] { return device_peak_flops(0.0, Precision::float32, kShort); });
  EXPECT_EQ(other.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout) << "did not wait";
  write_cache({{peak_cache_key(Precision::float32), {{"flops", 123e9}, {"kernel", "first rank"}}}});
  ::close(fd);
  const PeakFlops peak = other.get();
  EXPECT_EQ(peak.flops, 123e9);
  EXPECT_EQ(peak.source.rfind("cached in ", 0), 0u) << peak.source;
}

}  // namespace
}  // namespace titan::train
