// Measured peak arithmetic throughput of this machine: long chains of independent FMA /
// dot-product / AMX tile instructions in registers (no memory traffic), on 1..n OpenMP threads; and
// a large bf16 GEMM through gemm_bf16.
// Used by the trainer (MFU, cached: train/peak_flops.h), bench/peak_flops (the table in
// docs/performance.md) and bench/gemm_bench (% of peak).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace titan::kernels {

enum class PeakKernel {
  fp32_avx512,  // _mm512_fmadd_ps, 16 chains x 16 lanes x 2 FLOPs
  fp32_avx2,    // _mm256_fmadd_ps, 12 chains x 8 lanes x 2 FLOPs
  bf16_avx512,  // _mm512_dpbf16_ps, 16 chains x 32 bf16 pairs x 2 FLOPs
  bf16_amx,     // _tile_dpbf16ps, 4 accumulator tiles x 16 x 16 x 32 x 2 FLOPs (asks Linux for AMX first)
};

const char* peak_kernel_name(PeakKernel kernel);
bool peak_kernel_supported(PeakKernel kernel);  // from CPUID

struct PeakMeasurement {
  double median_gflops = 0.0;  // over the timed repeats
  double max_gflops = 0.0;
  // CPU time this process got during the timed repeats / (threads x wall time). Below 1 when
  // another process took turns on our cores: the numbers above are then too low.
  double cpu_share = 0.0;
};

// Runs `kernel` on `threads` threads, each for about `seconds_per_repeat`, `repeats` times.
// Throws titan::Error when the CPU lacks the kernel's ISA.
PeakMeasurement measure_peak(PeakKernel kernel, int threads, double seconds_per_repeat = 0.25,
                             int repeats = 5);

// gemm_bf16 on [n, n] x [n, n] (bf16 in, f32 out), timed like measure_peak. Where
// gemm_bf16_is_emulated() this is an fp32 GEMM in disguise.
PeakMeasurement measure_gemm_bf16_peak(int threads, double seconds_per_repeat = 0.25, int repeats = 5,
                                       int64_t n = 2048);

// The fp32 peak that GEMM efficiency is quoted against: AVX-512 when the CPU has it, else AVX2.
PeakKernel best_fp32_kernel();

}  // namespace titan::kernels
