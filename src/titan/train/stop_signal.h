// SIGINT / SIGTERM while training: the first one asks the run to stop after the step in progress
// (every rank agrees on the step), finish the in-flight checkpoint write, flush the metrics and
// exit 128 + signal (130, 143), as a shell expects of an interrupted command. A second signal of
// either kind, or one outside the training loop, takes the default action (ends the process at
// once). Under titan launch (TITAN_LAUNCH_SIGNALS set) SIGUSR1 / SIGUSR2 count as SIGINT / SIGTERM:
// launch relays them so, through mpirun.
//
// No signal handler ever runs on a thread that computes: the program blocks these signals in
// every thread before it starts any (take_stop_signals_on_own_thread) and one thread of their own
// receives them with sigwait. A handler interrupting oneDNN's JIT GEMM kernels corrupts the heap:
// up to oneDNN 3.11.0 (Debian 12 ships 2.6.3) they point rsp into a heap workspace, and the
// kernel pushes the signal frame there (oneDNN issue #4845). With a handler a SIGTERM crashed
// about one run in four here ("corrupted size vs. prev_size", or a gradient norm of 1e34).
#pragma once

#include "titan/core/error.h"

namespace titan::train {

// Call first in a program that trains, before it starts any thread (OpenMP, MPI and the data
// loader start theirs later and inherit the mask): blocks the stop signals in the calling thread
// and starts the thread that takes them. Idempotent. A program that does not call it keeps its
// own signal dispositions and StopSignals never sees a signal.
void take_stop_signals_on_own_thread();

// The training loop's scope: while one exists, the first stop signal is recorded (pending())
// instead of ending the process.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // 0, or the signal (SIGINT / SIGTERM) received since construction.
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
