// Console logging for the library: one line per call, "[titan] ..." on stderr. Quiet mode for tests.
#pragma once

#include <string>

namespace titan {

enum class LogLevel { debug, info, warn, error };

void log(LogLevel level, const std::string& message);
inline void log_info(const std::string& message) { log(LogLevel::info, message); }
inline void log_warn(const std::string& message) { log(LogLevel::warn, message); }
void set_log_level(LogLevel min_level);

}  // namespace titan
