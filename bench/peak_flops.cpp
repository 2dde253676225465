// peak_flops: this machine's measured peak FLOP/s for fp32 FMA (AVX-512, AVX2), the bf16
// dot product (AVX-512 BF16) and a 2048^3 gemm_bf16 (oneDNN: AMX tiles where present), on 1 and
// 2 threads (OpenMP). The loops are register-only with 12-16 independent accumulator chains, so
// their number is the FMA/dot-product port limit at the clock the core holds under that load.
// Then the peak per precision that MFU is quoted against (train/peak_flops.h): float32 = the FMA
// kernel, bfloat16 = the best of the dot kernel and the GEMM (the fp32 one where bf16 is emulated).
//
//   build-lin/bench/peak_flops [--seconds S] [--repeats R]
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "harness.h"
#include "titan/core/cpu_features.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/peak.h"

using namespace titan::bench;
using namespace titan::kernels;

int main(int argc, char** argv) {
  double seconds = 0.25;
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else {
      std::cerr << "usage: peak_flops [--seconds S] [--repeats R]\n";
      return 2;
    }
  }
  const titan::CpuFeatures& f = titan::cpu_features();
  std::cout << "CPU: " << titan::cpu_model_name() << ", " << omp_get_num_procs() << " logical CPUs, path "
            << titan::cpu_path_name() << " (avx512f=" << f.avx512f << " avx512_bf16=" << f.avx512_bf16
            << " amx_bf16=" << f.amx_bf16 << ")\n";
  std::cout << "median (max) over " << repeats << " repeats of ~" << seconds
            << " s; cpu share = CPU time / (threads x wall): below ~0.9, another process took our cores\n\n";

  Table table({{"kernel", -38}, {"threads", 7}, {"GFLOP/s", 9}, {"max", 9}, {"per thread", 10}, {"cpu share", 9}});
  table.print_header();
  nlohmann::json result = nlohmann::json::array();
  const char* const kGemm = "gemm_bf16 2048^3 (oneDNN)";
  double fp32_max = 0.0, bf16_max = 0.0;  // on 2 threads, best repeat (what MFU uses)
  const auto row = [&](const std::string& name, int threads, const PeakMeasurement& m) {
    table.print_row({name, std::to_string(threads), fixed(m.median_gflops), fixed(m.max_gflops),
                     fixed(m.median_gflops / threads), fixed(m.cpu_share, 2)});
    result.push_back({{"kernel", name}, {"threads", threads}, {"gflops", m.median_gflops},
                      {"max_gflops", m.max_gflops}, {"cpu_share", m.cpu_share}});
  };
  for (const PeakKernel kernel :
       {PeakKernel::fp32_avx512, PeakKernel::fp32_avx2, PeakKernel::bf16_avx512, PeakKernel::bf16_amx}) {
    for (const int threads : {1, 2}) {
      if (!peak_kernel_supported(kernel)) {
        table.print_row({peak_kernel_name(kernel), std::to_string(threads), "n/a", "", ""});
        continue;
      }
      const PeakMeasurement m = measure_peak(kernel, threads, seconds, repeats);
      row(peak_kernel_name(kernel), threads, m);
      if (threads == 2 && kernel == best_fp32_kernel()) fp32_max = m.max_gflops;
      if (threads == 2 && (kernel == PeakKernel::bf16_avx512 || kernel == PeakKernel::bf16_amx)) {
        bf16_max = std::max(bf16_max, m.max_gflops);
      }
    }
  }
  const bool emulated = gemm_bf16_is_emulated();
  for (const int threads : {1, 2}) {
    const PeakMeasurement m = measure_gemm_bf16_peak(threads, seconds, repeats);
    row(std::string(kGemm) + (emulated ? " emulated" : ""), threads, m);
    if (threads == 2 && !emulated) bf16_max = std::max(bf16_max, m.max_gflops);
  }
  if (emulated) bf16_max = fp32_max;
  std::cout << "\npeak per precision on 2 threads (best repeat; what MFU is quoted against):\n"
            << "  float32   " << fixed(fp32_max) << " GFLOP/s\n"
            << "  bfloat16  " << fixed(bf16_max) << " GFLOP/s"
            << (emulated ? " (gemm_bf16 is emulated in fp32 here: the fp32 peak)" : "") << "\n";
  print_result({{"bench", "peak_flops"}, {"rows", result},
                {"peak_gflops", {{"float32", fp32_max}, {"bfloat16", bf16_max}}}, {"bf16_emulated", emulated}});
  return 0;
}
