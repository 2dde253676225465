// The device peak FLOP/s that MFU is quoted against, per compute precision.
// On CPU, measured on the threads this process uses:
//   float32   the fp32 FMA port limit (kernels::measure_peak, the number docs/performance.md quotes);
//   bfloat16  the best of the bf16 dot-product loop, the AMX tile loop (where the CPU and Linux allow
//             it) and a large gemm_bf16; where gemm_bf16 is emulated in f32, the fp32 peak, and the
//             source says so.
// A measurement is the best of several repeats and is cached in $XDG_CACHE_HOME/titan/peak_flops.json
// (else ~/.cache/titan/...), keyed by CPU model, precision, kernel and thread count, only when the
// machine was quiet (our threads had their cores and the repeats agree). Measuring and writing hold
// an flock on peak_flops.json.lock, so ranks started together measure one at a time and a waiting
// rank reads the value the first one cached. metrics.peak_tflops > 0 skips all of it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "titan/train/precision.h"

namespace titan::train {

struct PeakOptions {
  // Each kernel runs `repeats` times for about `seconds_per_repeat`; the fastest repeat counts.
  double seconds_per_repeat = 0.25;
  int repeats = 5;
  int64_t gemm_size = 2048;  // the bf16 GEMM is [n, n] x [n, n]
};

struct PeakFlops {
  double flops = 0.0;  // FLOP/s
  Precision precision = Precision::float32;
  std::string source;  // "metrics.peak_tflops", "measured: ..." or "cached in <path> (...)"
  bool configured = false;   // from metrics.peak_tflops
  bool remeasured = false;   // the one re-measurement checked_mfu may do has been done
  bool raised = false;       // checked_mfu raised it to an achieved rate
};

PeakFlops device_peak_flops(double configured_tflops, Precision precision, const PeakOptions& options = {});

// Where the cache lives (empty without XDG_CACHE_HOME and HOME) and the key of this machine's
// entry for `precision` on the threads this process uses.
std::filesystem::path peak_cache_path();
std::string peak_cache_key(Precision precision);

// MFU in percent of `peak`, never above 100. An achieved rate above the peak means the peak is
// wrong (measured under load, or a configured figure too low): a measured peak is re-measured once
// and the cache replaced; if the achieved rate still exceeds it (or the peak was configured), the
// peak is raised to the achieved rate for this run. Each correction logs one warning line.
double checked_mfu(double achieved_flops, PeakFlops& peak, const PeakOptions& options = {});

// Total memory of the device the run uses (on CPU: MemTotal of /proc/meminfo), for "memory %".
double device_memory_bytes();

}  // namespace titan::train
