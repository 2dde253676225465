// Console logging for the library: one line per call, "[titan] ..." on stderr. Quiet mode for tests.
#pragma once

#include <string>

namespace titan {

enum class LogLevel { debug, info, warn, error };

void log(LogLevel level, const std::string& message);
inline void log_info(const std::string& message) { log(LogLevel::info, message); }
inline void log_warn(const std::string& message) { log(LogLevel::warn, message); }
void set_log_level(LogLevel min_level);

// Multi-rank jobs: every line is tagged "[rank r]"; a rank outside the console's rank filter
// (console = false) prints warnings and errors only; with a tee path, every line of this rank is
// also appended to that file.
void set_log_rank(int rank, int world, bool console, const std::string& tee_path = "");
bool log_console_enabled();
const std::string& log_rank_tag();  // "[rank3]" in a multi-rank job, else ""  // false: this rank's info lines (and metrics lines) stay off the console
// The tee file, if any (the metrics line goes there too).
void log_tee_line(const std::string& line);

}  // namespace titan
