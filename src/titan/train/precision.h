// Mixed precision (training.mixed_precision_param / _reduce, torchtitan's fields): the compute
// dtype the model runs in, and the start-up line that says what it means on this CPU.
#pragma once

#include <string>

#include "titan/config/job_config.h"
#include "titan/core/dtype.h"

namespace titan::train {

// "float32" -> f32, "bfloat16" -> bf16 (validated by config::validate).
DType compute_dtype_of(const std::string& mixed_precision_param);
inline DType compute_dtype(const config::JobConfig& c) {
  return compute_dtype_of(c.training.mixed_precision_param);
}

// What the run computes in and with which kernel, e.g. "bfloat16 compute (oneDNN bf16 matmul,
// avx512_core_bf16); f32 master weights, gradients and AdamW state" or, on a CPU without bf16
// instructions, "... emulated: bf16 operands widened to f32 (slower than float32 here)".
std::string precision_line(const std::string& mixed_precision_param);

}  // namespace titan::train
