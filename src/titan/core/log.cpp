#include "titan/core/log.h"

#include <cstdio>
#include <mutex>

#include "titan/core/error.h"

namespace titan {

static LogLevel g_min_level = LogLevel::info;
static std::string g_rank_tag;
static bool g_console = true;
static std::FILE* g_tee = nullptr;
static std::mutex g_mutex;

void set_log_level(LogLevel min_level) { g_min_level = min_level; }

void set_log_rank(int rank, int world, bool console, const std::string& tee_path) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_rank_tag = world > 1 ? str("[rank", rank, "]") : "";
  g_console = console;
  if (!tee_path.empty()) {
    g_tee = std::fopen(tee_path.c_str(), "a");
    TITAN_CHECK(g_tee != nullptr, "[log] cannot open the tee file ", tee_path, ". HINT: check that --tee names a writable folder");
  }
}

bool log_console_enabled() { return g_console; }
const std::string& log_rank_tag() { return g_rank_tag; }

void log_tee_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_tee == nullptr) return;
  std::fprintf(g_tee, "%s\n", line.c_str());
  std::fflush(g_tee);
}

void log(LogLevel level, const std::string& message) {
  if (level < g_min_level) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  const char* tag = level == LogLevel::warn ? " WARNING" : level == LogLevel::error ? " ERROR" : "";
  if (g_console || level >= LogLevel::warn) std::fprintf(stderr, "[titan]%s%s %s\n", g_rank_tag.c_str(), tag, message.c_str());
  if (g_tee != nullptr) {
    std::fprintf(g_tee, "[titan]%s%s %s\n", g_rank_tag.c_str(), tag, message.c_str());
    std::fflush(g_tee);
  }
}

}  // namespace titan
