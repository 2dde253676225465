// The device peak FLOP/s that MFU is quoted against.
// On CPU: the fp32 FMA port limit (kernels::measure_peak, the number docs/performance.md quotes) on
// the threads this process uses, measured once (about one second) and cached in
// $XDG_CACHE_HOME/titan/peak_flops.json (else ~/.cache/titan/...), keyed by CPU model, kernel and
// thread count. metrics.peak_tflops > 0 skips both (e.g. a vendor figure).
#pragma once

#include <string>

namespace titan::train {

struct PeakFlops {
  double flops = 0.0;   // FLOP/s
  std::string source;   // "metrics.peak_tflops", "measured ..." or "cached in <path>"
};

PeakFlops device_peak_flops(double configured_tflops);

// Total memory of the device the run uses (on CPU: MemTotal of /proc/meminfo), for "memory %".
double device_memory_bytes();

}  // namespace titan::train
