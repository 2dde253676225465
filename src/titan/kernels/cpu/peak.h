// Measured peak arithmetic throughput of this machine: long chains of independent FMA /
// dot-product instructions in registers (no memory traffic), on 1..n OpenMP threads.
// Used by the trainer (MFU, cached: train/peak_flops.h), bench/peak_flops (the table in
// docs/performance.md) and bench/gemm_bench (% of peak).
#pragma once

#include <string>
#include <vector>

namespace titan::kernels {

enum class PeakKernel {
  fp32_avx512,  // _mm512_fmadd_ps, 16 chains x 16 lanes x 2 FLOPs
  fp32_avx2,    // _mm256_fmadd_ps, 12 chains x 8 lanes x 2 FLOPs
  bf16_avx512,  // _mm512_dpbf16_ps, 16 chains x 32 bf16 pairs x 2 FLOPs
};

const char* peak_kernel_name(PeakKernel kernel);
bool peak_kernel_supported(PeakKernel kernel);  // from CPUID

struct PeakMeasurement {
  double median_gflops = 0.0;  // over the timed repeats
  double max_gflops = 0.0;
};

// Runs `kernel` on `threads` threads, each for about `seconds_per_repeat`, `repeats` times.
// Throws titan::Error when the CPU lacks the kernel's ISA.
PeakMeasurement measure_peak(PeakKernel kernel, int threads, double seconds_per_repeat = 0.25,
                             int repeats = 5);

// The fp32 peak that GEMM efficiency is quoted against: AVX-512 when the CPU has it, else AVX2.
PeakKernel best_fp32_kernel();

}  // namespace titan::kernels
