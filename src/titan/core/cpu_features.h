// Run-time CPU detection. The build's baseline is AVX2+FMA; wider paths are picked from this.
#pragma once

#include <string>

namespace titan {

struct CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;
  bool amx_bf16 = false;
};

const CpuFeatures& cpu_features();
// Linux gives a process the AMX tile state only on request (arch_prctl ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA, kernel 5.16 and later); without it a tile instruction faults. Asks once,
// returns whether it was granted (false off Linux's x86-64 AMX support or without AMX).
bool amx_tiles_permitted();
// The widest kernel path this CPU takes: "avx512-bf16", "avx512" or "avx2".
std::string cpu_path_name();
// "model name" of /proc/cpuinfo ("unknown cpu" when absent), e.g. for caches keyed by machine.
std::string cpu_model_name();
// Throws a clear error when the CPU lacks the AVX2+FMA baseline this binary was built for.
void require_cpu_baseline();

}  // namespace titan
