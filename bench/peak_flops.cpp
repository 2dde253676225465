// peak_flops: this machine's measured peak FLOP/s for fp32 FMA (AVX-512, AVX2) and the bf16
// dot product (AVX-512 BF16), on 1 and 2 threads (OpenMP). Register-only loops with 12-16
// independent accumulator chains, so the number is the FMA/dot-product port limit at the
// clock the core holds under that load.
//
//   build-lin/bench/peak_flops [--seconds S] [--repeats R]
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "harness.h"
#include "titan/kernels/cpu/peak.h"
#include "titan/core/cpu_features.h"

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
  std::cout << "median (max) over " << repeats << " repeats of ~" << seconds << " s\n\n";

  Table table({{"kernel", -38}, {"threads", 7}, {"GFLOP/s", 9}, {"max", 9}, {"per thread", 10}});
  table.print_header();
  nlohmann::json result = nlohmann::json::array();
  for (const PeakKernel kernel : {PeakKernel::fp32_avx512, PeakKernel::fp32_avx2, PeakKernel::bf16_avx512}) {
    for (const int threads : {1, 2}) {
      if (!peak_kernel_supported(kernel)) {
        table.print_row({peak_kernel_name(kernel), std::to_string(threads), "n/a", "", ""});
        continue;
      }
      const PeakMeasurement m = measure_peak(kernel, threads, seconds, repeats);
      table.print_row({peak_kernel_name(kernel), std::to_string(threads), fixed(m.median_gflops),
                       fixed(m.max_gflops), fixed(m.median_gflops / threads)});
      result.push_back({{"kernel", peak_kernel_name(kernel)},
                        {"threads", threads},
                        {"gflops", m.median_gflops},
                        {"max_gflops", m.max_gflops}});
    }
  }
  print_result({{"bench", "peak_flops"}, {"rows", result}});
  return 0;
}
