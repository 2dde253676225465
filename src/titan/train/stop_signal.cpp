#include "titan/train/stop_signal.h"

#include <atomic>
#include <csignal>

namespace titan::train {
namespace {

std::atomic<int> g_pending{0};
struct sigaction g_previous[2];
constexpr int kSignals[2] = {SIGINT, SIGTERM};

extern "C" void on_stop_signal(int signal) { g_pending.store(signal); }

}  // namespace

StopSignals::StopSignals() {
  g_pending.store(0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_RESTART;  // one-shot: the second signal takes the default action
  for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < 2; ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

int StopSignals::pending() { return g_pending.load(); }

const char* signal_name(int signal) {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

}  // namespace titan::train
