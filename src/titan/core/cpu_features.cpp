#include "titan/core/cpu_features.h"

#include <fstream>

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "titan/core/error.h"

namespace titan {

static CpuFeatures detect() {
  CpuFeatures f;
  __builtin_cpu_init();
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // CPUID leaf 7 subleaf 1: EAX bit 5 = AVX512_BF16. Leaf 7 subleaf 0: EDX bit 22 = AMX-BF16.
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) f.avx512_bf16 = f.avx512f && (eax >> 5) & 1;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) f.amx_bf16 = (edx >> 22) & 1;
  return f;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = detect();
  return features;
}

bool amx_tiles_permitted() {
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  static const bool permitted =
      cpu_features().amx_bf16 && ::syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return permitted;
}

std::string cpu_path_name() {
#ifdef TITAN_BASELINE_ONLY
  return "avx2 (baseline-only build)";
#endif
  const CpuFeatures& f = cpu_features();
  const bool avx512 = f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  if (avx512 && f.avx512_bf16) return "avx512-bf16";
  if (avx512) return "avx512";
  return "avx2";
}

void require_cpu_baseline() {
  const CpuFeatures& f = cpu_features();
  TITAN_CHECK(f.avx2 && f.fma, "[cpu] this CPU lacks AVX2/FMA, the baseline titan is built for",
              ". HINT: run on an x86-64-v3 (Haswell or newer) machine");
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  }
  return "unknown cpu";
}

}  // namespace titan
