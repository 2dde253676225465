#include "titan/train/peak_flops.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "titan/checkpoint/atomic_file.h"
#include "titan/core/cpu_features.h"
#include "titan/core/error.h"
#include "titan/core/log.h"
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/peak.h"

namespace titan::train {
namespace {

std::filesystem::path cache_path() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::filesystem::path(xdg) / "titan" / "peak_flops.json";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::filesystem::path(home) / ".cache" / "titan" / "peak_flops.json";
  }
  return {};
}

}  // namespace

PeakFlops device_peak_flops(double configured_tflops) {
  if (configured_tflops > 0.0) return {configured_tflops * 1e12, "metrics.peak_tflops"};
  const kernels::PeakKernel kernel = kernels::best_fp32_kernel();
  const int threads = num_threads();
  const std::string key = str(cpu_model_name(), " | ", kernels::peak_kernel_name(kernel), " | ", threads, " threads");
  const std::filesystem::path path = cache_path();

  nlohmann::json cache = nlohmann::json::object();
  if (!path.empty()) {
    std::ifstream in(path);
    if (in) {
      // A damaged cache is only a cache: measure again and rewrite it.
      cache = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (!cache.is_object()) cache = nlohmann::json::object();
      if (cache.contains(key) && cache[key].is_number() && cache[key].get<double>() > 0.0) {
        return {cache[key].get<double>(), str("cached in ", path.string())};
      }
    }
  }
  log_info(str("measuring the fp32 peak for MFU (", kernels::peak_kernel_name(kernel), ", ", threads,
               " threads; once per machine, then cached)"));
  // The fastest repeat: another process sharing the cores can only slow a repeat down.
  const double flops = kernels::measure_peak(kernel, threads, 0.2, 5).max_gflops * 1e9;
  if (!path.empty()) {
    cache[key] = flops;
    std::error_code ec;
    std::filesystem::create_directories(path.parent_path(), ec);
    try {
      ckpt::write_text_file_atomic(path.string(), cache.dump(2) + "\n");
    } catch (const Error& e) {
      log_warn(str("could not cache the peak FLOP/s: ", e.what()));
    }
  }
  return {flops, str("measured: ", kernels::peak_kernel_name(kernel), " on ", threads, " threads")};
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
