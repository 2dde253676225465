#include "titan/ops/registry.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <cstdlib>
#include <cstring>

namespace titan::ops {

static std::atomic<bool> g_use_ref{[] {
  const char* env = std::getenv("TITAN_USE_REF");
  return env != nullptr && std::strcmp(env, "0") != 0 && env[0] != '\0';
}()};

bool use_ref() { return g_use_ref.load(std::memory_order_relaxed); }
void set_use_ref(bool value) { g_use_ref.store(value); }

static std::atomic<bool> g_profiling{false};
static std::mutex g_profile_mutex;
static std::map<std::string, OpProfileEntry> g_profile;

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void set_op_profiling(bool on) {
  std::lock_guard<std::mutex> lock(g_profile_mutex);
  if (on) g_profile.clear();
  g_profiling.store(on);
}

std::vector<OpProfileEntry> op_profile() {
  std::lock_guard<std::mutex> lock(g_profile_mutex);
  std::vector<OpProfileEntry> out;
  for (const auto& [name, entry] : g_profile) out.push_back(entry);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  return out;
}

OpTimer::OpTimer(const char* name) : name_(name) {
  if (g_profiling.load(std::memory_order_relaxed)) start_ = now();
}

OpTimer::~OpTimer() {
  if (start_ < 0.0) return;
  const double elapsed = now() - start_;
  std::lock_guard<std::mutex> lock(g_profile_mutex);
  OpProfileEntry& e = g_profile[name_];
  e.name = name_;
  e.seconds += elapsed;
  e.calls += 1;
}

}  // namespace titan::ops
