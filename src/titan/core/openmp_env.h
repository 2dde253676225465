// How titan's OpenMP threads wait. libgomp reads its environment once, in its initializer, before
// main (and before any constructor or .preinit_array function of the executable could change the
// environment it sees), so titan sets its default by re-executing itself with the variable set.
//
// Why: libgomp's threads spin up to GOMP_SPINCOUNT = 300,000 pause loops (about 3 ms) at every
// barrier before they sleep. On a quiet machine that hides the wake-up latency; beside another
// busy process it burns the CPU that the thread the barrier waits for needs: a 2-core full-depth
// Qwen3-0.6B fine-tune fell to 0.33x of its quiet speed, the quickstart to 0.2x. A spin of 1,000
// (about 10 us; libgomp's own value for oversubscribed threads) and then sleeping kept 0.53x and
// 0.5x and the quiet speed within noise (docs/performance.md (af)). A user's OMP_WAIT_POLICY or
// GOMP_SPINCOUNT wins.
#pragma once

namespace titan {

inline constexpr const char* kOpenmpSpinCount = "1000";

// First thing in main: unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, sets GOMP_SPINCOUNT to
// kOpenmpSpinCount (and TITAN_OPENMP_WAIT=default, which marks it as titan's) and re-executes
// /proc/self/exe with the same arguments. Returns when there was nothing to do, or when the exec
// failed (the program then runs with libgomp's default). The programs titan starts (mpirun's
// ranks) inherit the variables.
void reexec_with_openmp_wait_default(char** argv);

// Whether GOMP_SPINCOUNT is titan's default rather than the user's: for the startup log.
bool openmp_wait_is_titan_default();

}  // namespace titan
