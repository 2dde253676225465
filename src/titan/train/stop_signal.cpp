#include "titan/train/stop_signal.h"

#include <pthread.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace titan::train {
namespace {

std::atomic<int> g_pending{0};
std::atomic<bool> g_armed{false};  // a StopSignals scope exists

// SIGUSR1 / SIGUSR2: SIGINT / SIGTERM as titan launch relays them through mpirun (which forwards
// these two to every rank but kills the job on SIGINT / SIGTERM); taken only under launch.
sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (std::getenv("TITAN_LAUNCH_SIGNALS") != nullptr) {
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
  }
  return set;
}

// The default action of `signal` (all four end the process), taken on this thread: the only one
// that does not block it.
[[noreturn]] void default_action(int signal) {
  std::signal(signal, SIG_DFL);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, signal);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  std::raise(signal);
  std::abort();  // not reached: the default action of every signal in the set ends the process
}

[[noreturn]] void take_signals(sigset_t set) {
  for (;;) {
    int signal = 0;
    if (sigwait(&set, &signal) != 0) continue;
    const int as = signal == SIGUSR1 ? SIGINT : signal == SIGUSR2 ? SIGTERM : signal;
    int none = 0;
    if (g_armed.load() && g_pending.compare_exchange_strong(none, as)) continue;  // the first, in the loop
    default_action(signal);
  }
}

}  // namespace

void take_stop_signals_on_own_thread() {
  static std::once_flag once;
  std::call_once(once, [] {
    const sigset_t set = stop_signal_set();
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::thread(take_signals, set).detach();
  });
}

StopSignals::StopSignals() {
  g_pending.store(0);
  g_armed.store(true);
}

StopSignals::~StopSignals() { g_armed.store(false); }

int StopSignals::pending() { return g_pending.load(); }

const char* signal_name(int signal) {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

}  // namespace titan::train
