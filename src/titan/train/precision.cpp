#include "titan/train/precision.h"

#include "titan/core/error.h"
#include "titan/kernels/cpu/gemm.h"

namespace titan::train {

DType compute_dtype_of(const std::string& mixed_precision_param) {
  if (mixed_precision_param == "float32") return DType::f32;
  if (mixed_precision_param == "bfloat16") return DType::bf16;
  TITAN_FAIL("training.mixed_precision_param='", mixed_precision_param, "' is not float32 or bfloat16");
}

std::string precision_line(const std::string& mixed_precision_param) {
  if (compute_dtype_of(mixed_precision_param) == DType::f32) {
    return str("float32 compute (", kernels::gemm_backend_name(), ")");
  }
  const std::string kernel = kernels::gemm_bf16_is_emulated()
                                 ? "emulated: this CPU has no bf16 instructions, so bf16 operands are widened to f32 "
                                   "(the same numbers, slower than float32 here)"
                                 : "oneDNN bf16 matmul, f32 accumulation";
  return str("bfloat16 compute (", kernel, "); f32 master weights, gradients, AdamW state, norms, softmax and loss");
}

}  // namespace titan::train
