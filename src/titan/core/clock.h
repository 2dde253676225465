// Wall time for logs and metrics: the one steady clock every layer times itself with.
#pragma once

#include <chrono>

namespace titan {

using Clock = std::chrono::steady_clock;

// Seconds from t0 to now.
inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace titan
