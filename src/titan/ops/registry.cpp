#include "titan/ops/registry.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace titan::ops {

static std::atomic<bool> g_use_ref{[] {
  const char* env = std::getenv("TITAN_USE_REF");
  return env != nullptr && std::strcmp(env, "0") != 0 && env[0] != '\0';
}()};

bool use_ref() { return g_use_ref.load(std::memory_order_relaxed); }
void set_use_ref(bool value) { g_use_ref.store(value); }

}  // namespace titan::ops
