#include "titan/train/peak_flops.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "titan/checkpoint/atomic_file.h"
#include "titan/core/cpu_features.h"
#include "titan/core/error.h"
#include "titan/core/log.h"
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/peak.h"

namespace titan::train {
namespace {

// One measurement: the best repeat, and whether the machine was quiet while it ran.
struct Measured {
  double flops = 0.0;
  std::string kernel;
  std::string busy;  // empty when quiet, else why not
};

// A neighbour taking turns on our cores lowers our CPU share; one that came and went spreads the
// repeats. Either way the best repeat is too low, so it must not be cached as the peak.
std::string busy_reason(const kernels::PeakMeasurement& m) {
  if (m.cpu_share < 0.9) return str("our threads got ", static_cast<int>(100 * m.cpu_share), "% of their cores");
  if (m.median_gflops < 0.9 * m.max_gflops) {
    return str("repeats spread ", static_cast<int>(m.median_gflops), "-", static_cast<int>(m.max_gflops), " GFLOP/s");
  }
  return "";
}

Measured measure_fp32(int threads, const PeakOptions& o) {
  const kernels::PeakKernel kernel = kernels::best_fp32_kernel();
  const kernels::PeakMeasurement m = kernels::measure_peak(kernel, threads, o.seconds_per_repeat, o.repeats);
  return {m.max_gflops * 1e9, kernels::peak_kernel_name(kernel), busy_reason(m)};
}

// The kernels a precision's peak is the best of (also part of the cache key: a different set is a
// different figure).
std::string peak_kernels(Precision p) {
  const std::string fp32 = kernels::peak_kernel_name(kernels::best_fp32_kernel());
  if (p == Precision::float32) return fp32;
  if (kernels::gemm_bf16_is_emulated()) return str("bf16 emulated in fp32 (no bf16 kernel): ", fp32);
  if (kernels::peak_kernel_supported(kernels::PeakKernel::bf16_amx)) return "best of bf16 AMX tiles, bf16 dot AVX-512 and gemm_bf16";
  return kernels::peak_kernel_supported(kernels::PeakKernel::bf16_avx512)
             ? "best of bf16 dot AVX-512 and gemm_bf16"
             : "gemm_bf16";
}

Measured measure(Precision p, int threads, const PeakOptions& o) {
  // Emulated bf16 runs the fp32 FMA kernels, so its ceiling is the fp32 one.
  if (p == Precision::float32 || kernels::gemm_bf16_is_emulated()) {
    Measured m = measure_fp32(threads, o);
    m.kernel = peak_kernels(p);
    return m;
  }
  const kernels::PeakMeasurement gemm =
      kernels::measure_gemm_bf16_peak(threads, o.seconds_per_repeat, o.repeats, o.gemm_size);
  Measured best{gemm.max_gflops * 1e9, str("gemm_bf16 ", o.gemm_size, "^3"), busy_reason(gemm)};
  for (const kernels::PeakKernel kernel : {kernels::PeakKernel::bf16_avx512, kernels::PeakKernel::bf16_amx}) {
    if (!kernels::peak_kernel_supported(kernel)) continue;
    const kernels::PeakMeasurement dot = kernels::measure_peak(kernel, threads, o.seconds_per_repeat, o.repeats);
    if (best.busy.empty()) best.busy = busy_reason(dot);  // busy during any: not cached
    if (dot.max_gflops * 1e9 > best.flops) {
      best.flops = dot.max_gflops * 1e9;
      best.kernel = kernels::peak_kernel_name(kernel);
    }
  }
  return best;
}

// An exclusive flock on <cache>.lock while it lives, so that ranks started together measure one
// at a time (each would otherwise measure while the other computes) and the later one finds the
// earlier one's value. The OS drops the lock if the holder dies; a holder that is stopped is
// waited for two minutes, then we go on without the lock.
class CacheLock {
 public:
  explicit CacheLock(const std::filesystem::path& cache) {
    if (cache.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(cache.parent_path(), ec);
    const std::string path = cache.string() + ".lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return;  // a read-only cache folder: measure unlocked
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        log_warn(str("[peak_flops] ", path, " stayed locked for 2 minutes; measuring without it. HINT: another "
                     "titan process holds it (stopped?); delete the file if none runs"));
        ::close(fd_);
        fd_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~CacheLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the flock
  }
  CacheLock(const CacheLock&) = delete;
  CacheLock& operator=(const CacheLock&) = delete;

 private:
  int fd_ = -1;
};

nlohmann::json read_cache(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  // A damaged cache is only a cache: measure again and rewrite it.
  nlohmann::json cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  return cache.is_object() ? cache : nlohmann::json::object();
}

double cached_flops(const nlohmann::json& cache, const std::string& key) {
  if (!cache.contains(key) || !cache[key].is_object()) return 0.0;
  const nlohmann::json& e = cache[key];
  return e.contains("flops") && e["flops"].is_number() ? std::max(0.0, e["flops"].get<double>()) : 0.0;
}

// Measures `precision` and caches the result. Every measurement is a lower bound on the true peak
// (a busy machine only slows it down), so the cache only goes up: a first value is written only
// when the machine was quiet; a later one whenever it beats the cached value, even under load.
// Call with the CacheLock held.
PeakFlops measure_and_cache(Precision precision, const PeakOptions& options) {
  const int threads = num_threads();
  const std::filesystem::path path = peak_cache_path();
  const std::string key = peak_cache_key(precision);
  const Measured m = measure(precision, threads, options);
  PeakFlops peak{m.flops, precision, str("measured: ", m.kernel, " on ", threads, " threads"), false, false, false};
  nlohmann::json cache = path.empty() ? nlohmann::json::object() : read_cache(path);
  const double before = cached_flops(cache, key);
  if (path.empty()) {
    peak.source += ", not cached (no XDG_CACHE_HOME or HOME)";
  } else if (m.flops <= before) {
    peak.source += str(", not cached (", path.string(), " holds ", before / 1e12, " TFLOP/s)");
  } else if (before == 0.0 && !m.busy.empty()) {
    peak.source += str(", not cached: the machine was busy (", m.busy, "); measured again next run");
  } else {
    cache[key] = {{"flops", m.flops}, {"kernel", m.kernel}};
    try {
      ckpt::write_text_file_atomic(path.string(), cache.dump(2) + "\n");
      peak.source += str(", cached in ", path.string());
    } catch (const Error& e) {
      log_warn(str("[peak_flops] could not cache the peak FLOP/s: ", e.what()));
    }
  }
  return peak;
}

}  // namespace

std::filesystem::path peak_cache_path() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::filesystem::path(xdg) / "titan" / "peak_flops.json";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::filesystem::path(home) / ".cache" / "titan" / "peak_flops.json";
  }
  return {};
}

std::string peak_cache_key(Precision precision) {
  return str(cpu_model_name(), " | ", precision_name(precision), " | ", peak_kernels(precision), " | ",
             num_threads(), " threads");
}

PeakFlops device_peak_flops(double configured_tflops, Precision precision, const PeakOptions& options) {
  if (configured_tflops > 0.0) return {configured_tflops * 1e12, precision, "metrics.peak_tflops", true, false, false};
  const std::filesystem::path path = peak_cache_path();
  const CacheLock lock(path);
  if (!path.empty()) {
    const double flops = cached_flops(read_cache(path), peak_cache_key(precision));
    if (flops > 0.0) return {flops, precision, str("cached in ", path.string()), false, false, false};
  }
  log_info(str("measuring the ", precision_name(precision), " peak for MFU (", peak_kernels(precision), ", ",
               num_threads(), " threads; cached once measured on a quiet machine)"));
  return measure_and_cache(precision, options);
}

double checked_mfu(double achieved_flops, PeakFlops& peak, const PeakOptions& options) {
  if (achieved_flops <= peak.flops) return 100.0 * achieved_flops / peak.flops;
  if (!peak.configured && !peak.remeasured) {
    peak.remeasured = true;
    const double old = peak.flops;
    const std::string old_source = peak.source;
    const std::filesystem::path path = peak_cache_path();
    const CacheLock lock(path);
    // Another rank may have just re-measured and replaced the value: take it if it is higher.
    const double cached = path.empty() ? 0.0 : cached_flops(read_cache(path), peak_cache_key(peak.precision));
    if (cached > old) {
      peak.flops = cached;
      peak.source = str("cached in ", path.string(), " (replaced by another run)");
    } else {
      const PeakFlops fresh = measure_and_cache(peak.precision, options);
      peak.flops = std::max(old, fresh.flops);
      peak.source = fresh.source;
    }
    log_warn(str("[mfu] achieved ", achieved_flops / 1e12, " TFLOP/s beats the ", precision_name(peak.precision),
                 " peak ", old / 1e12, " TFLOP/s (", old_source, "), so that peak was wrong; re-measured: ",
                 peak.flops / 1e12, " TFLOP/s (", peak.source, ")"));
  }
  if (achieved_flops > peak.flops) {
    if (!peak.raised) {
      log_warn(str("[mfu] achieved ", achieved_flops / 1e12, " TFLOP/s exceeds the ", precision_name(peak.precision),
                   " peak ", peak.flops / 1e12, " TFLOP/s (", peak.source,
                   "); MFU is quoted against the achieved rate from here on. HINT: ",
                   peak.configured ? "raise metrics.peak_tflops or set it to 0 to measure"
                                   : "the FLOP count per token may overcount what the kernels do"));
    }
    peak.raised = true;
    peak.flops = achieved_flops;
    peak.source = "raised to an achieved rate";
  }
  return 100.0 * achieved_flops / peak.flops;
}

double device_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  double kib = 0.0;
  while (in >> name >> kib >> unit) {
    if (name == "MemTotal:") return kib * 1024.0;
  }
  return static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

}  // namespace titan::train
