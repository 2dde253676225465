#include "titan/train/stop_signal.h"

#include <atomic>
#include <csignal>
#include <cstdlib>

namespace titan::train {
namespace {

std::atomic<int> g_pending{0};
// SIGUSR1 / SIGUSR2: SIGINT / SIGTERM as titan launch relays them through mpirun (which forwards
// these two to every rank but kills the job on SIGINT / SIGTERM); heeded only under launch.
constexpr int kSignals[4] = {SIGINT, SIGTERM, SIGUSR1, SIGUSR2};
struct sigaction g_previous[4];

extern "C" void on_stop_signal(int signal) {
  g_pending.store(signal == SIGUSR1 ? SIGINT : signal == SIGUSR2 ? SIGTERM : signal);
}

int handled_signals() { return std::getenv("TITAN_LAUNCH_SIGNALS") != nullptr ? 4 : 2; }

}  // namespace

StopSignals::StopSignals() {
  g_pending.store(0);
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND | SA_RESTART;  // one-shot: the second signal takes the default action
  for (int i = 0; i < handled_signals(); ++i) sigaction(kSignals[i], &action, &g_previous[i]);
}

StopSignals::~StopSignals() {
  for (int i = 0; i < handled_signals(); ++i) sigaction(kSignals[i], &g_previous[i], nullptr);
}

int StopSignals::pending() { return g_pending.load(); }

const char* signal_name(int signal) {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

}  // namespace titan::train
