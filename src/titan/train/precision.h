// Mixed precision (training.mixed_precision_param / _reduce, torchtitan's fields): the precision the
// model computes in, its tensor dtype, and the start-up line that says what it means on this CPU.
#pragma once

#include <string>

#include "titan/core/dtype.h"

namespace titan::train {

enum class Precision { float32, bfloat16 };

const char* precision_name(Precision precision);  // "float32", "bfloat16"
// "float32" | "bfloat16" (the values of training.mixed_precision_param); throws on anything else.
Precision parse_precision(const std::string& name);
inline DType compute_dtype(Precision precision) { return precision == Precision::bfloat16 ? DType::bf16 : DType::f32; }

// What the run computes in and with which kernel, e.g. "bfloat16 compute (oneDNN bf16 matmul, f32
// accumulation); ..." or, on a CPU without bf16 instructions, "... emulated: ... widens ... to f32".
std::string precision_line(Precision precision);

}  // namespace titan::train
