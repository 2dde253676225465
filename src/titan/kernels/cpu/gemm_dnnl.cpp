// gemm() on oneDNN's row-major sgemm (picked by measurement: docs/performance.md). oneDNN
// dispatches its own JIT kernels per ISA at run time and threads with OpenMP, like us.
#include <oneapi/dnnl/dnnl.h>

#include <string>

#include "titan/core/error.h"
#include "titan/kernels/cpu/gemm.h"

namespace titan::kernels {

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  const dnnl_status_t status = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha,
                                          a, lda, b, ldb, beta, c, ldc);
  TITAN_CHECK(status == dnnl_success, "[gemm] oneDNN sgemm failed with status ",
              static_cast<int>(status), " for M=", m, " N=", n, " K=", k, " lda=", lda, " ldb=",
              ldb, " ldc=", ldc, ". HINT: leading dimensions must be >= the row width");
}

const char* gemm_backend_name() {
  static const std::string name = [] {
    const dnnl_version_t* v = dnnl_version();
    std::string isa;
    switch (dnnl_get_effective_cpu_isa()) {
      case dnnl_cpu_isa_avx2: isa = "avx2"; break;
      case dnnl_cpu_isa_avx512_core: isa = "avx512_core"; break;
      case dnnl_cpu_isa_avx512_core_vnni: isa = "avx512_core_vnni"; break;
      case dnnl_cpu_isa_avx512_core_bf16: isa = "avx512_core_bf16"; break;
      case dnnl_cpu_isa_avx512_core_amx: isa = "avx512_core_amx"; break;
      default: isa = "isa " + std::to_string(static_cast<int>(dnnl_get_effective_cpu_isa())); break;
    }
    return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
           std::to_string(v->patch) + " (sgemm, " + isa + ")";
  }();
  return name.c_str();
}

}  // namespace titan::kernels
