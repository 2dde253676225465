#include "titan/core/log.h"

#include <cstdio>
#include <mutex>

namespace titan {

static LogLevel g_min_level = LogLevel::info;

void set_log_level(LogLevel min_level) { g_min_level = min_level; }

void log(LogLevel level, const std::string& message) {
  if (level < g_min_level) return;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  const char* tag = level == LogLevel::warn ? " WARNING" : level == LogLevel::error ? " ERROR" : "";
  std::fprintf(stderr, "[titan]%s %s\n", tag, message.c_str());
}

}  // namespace titan
