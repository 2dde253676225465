#include <cstdlib>

#include "titan/core/cpu_features.h"
#include "titan/core/log.h"
#include "titan/core/openmp_env.h"
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
  const ThreadDefault threads = default_num_threads();
  const std::string quota =
      threads.cgroup_cpus > 0 && threads.cgroup_cpus < threads.cpus ? str(", cgroup quota ", threads.cgroup_cpus) : "";
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  const std::string wait = std::getenv("OMP_WAIT_POLICY") != nullptr ? str("OMP_WAIT_POLICY=", std::getenv("OMP_WAIT_POLICY"))
                           : spin == nullptr                       ? std::string("libgomp's default spin")
                                                                   : str("spin ", spin, " then sleep",
                                                                         openmp_wait_is_titan_default() ? "" : " (GOMP_SPINCOUNT)");
  log_info(str("titan 0.1.0 | cpu path ", cpu_path_name(), f.amx_bf16 ? " (AMX-BF16 present)" : "",
               " | GEMM ", kernels::gemm_backend_name(), " | ", num_threads(), " threads (", threads.cpus, " CPUs",
               quota, "; waits: ", wait,
               ") | cuda: ", kernels::cuda_backend_name()));
  std::string kernels;
  for (const auto& [op, impl] : ops::selected_kernels(Device::cpu)) {
    kernels += (kernels.empty() ? "" : ", ") + op + "=" + impl;
  }
  log_info(str("kernels", ops::use_ref() ? " (TITAN_USE_REF: references forced)" : "", ": ", kernels));
}

}  // namespace titan::cli
