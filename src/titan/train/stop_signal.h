// SIGINT / SIGTERM while training: the first one asks the run to stop after the step in progress
// (every rank agrees on the step), finish the in-flight checkpoint write, flush the metrics and
// exit 128 + signal (130, 143), as a shell expects of an interrupted command. A second signal of
// either kind ends the process at once (the handler is one-shot: SA_RESETHAND). Under titan launch
// (TITAN_LAUNCH_SIGNALS set) SIGUSR1 / SIGUSR2 count as SIGINT / SIGTERM: launch relays them so,
// through mpirun.
#pragma once

#include "titan/core/error.h"

namespace titan::train {

// Installed for the training loop's lifetime; the previous dispositions come back after it.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // 0, or the signal number received since construction.
  static int pending();
};

// Thrown when a run stopped on a signal after saving what it had: the CLI prints `what()` and
// exits 128 + signal (no MPI_Abort: every rank stops at the same step on its own).
class Interrupted : public Error {
 public:
  Interrupted(int signal, const std::string& message) : Error(message), signal_(signal) {}
  int signal() const { return signal_; }

 private:
  int signal_;
};

// "SIGINT", "SIGTERM", or "a signal".
const char* signal_name(int signal);

}  // namespace titan::train
