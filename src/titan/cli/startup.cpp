#include "titan/core/cpu_features.h"
#include "titan/core/log.h"
#include "titan/core/parallel.h"
#include "titan/cli/commands.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cuda/device.h"
#include "titan/ops/builtin.h"
#include "titan/ops/registry.h"

namespace titan::cli {

void log_startup() {
  require_cpu_baseline();
  const CpuFeatures& f = cpu_features();
  log_info(str("titan 0.1.0 | cpu path ", cpu_path_name(), f.amx_bf16 ? " (AMX-BF16 present)" : "",
               " | GEMM ", kernels::gemm_backend_name(), " | ", num_threads(), " threads | cuda: ",
               kernels::cuda_backend_name()));
  std::string kernels;
  for (const auto& [op, impl] : ops::selected_kernels(Device::cpu)) {
    kernels += (kernels.empty() ? "" : ", ") + op + "=" + impl;
  }
  log_info(str("kernels", ops::use_ref() ? " (TITAN_USE_REF: references forced)" : "", ": ", kernels));
}

}  // namespace titan::cli
