#include "titan/train/precision.h"

#include "titan/core/error.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/ops/attention/attention.h"

namespace titan::train {

const char* precision_name(Precision precision) { return precision == Precision::bfloat16 ? "bfloat16" : "float32"; }

Precision parse_precision(const std::string& name) {
  if (name == "float32") return Precision::float32;
  if (name == "bfloat16") return Precision::bfloat16;
  TITAN_FAIL("[precision] '", name, "' is unknown. HINT: use float32 or bfloat16 (training.mixed_precision_param)");
}

std::string precision_line(Precision precision) {
  if (precision == Precision::float32) return str("float32 compute (", kernels::gemm_backend_name(), ")");
  const std::string kernel = kernels::gemm_bf16_is_emulated()
                                 ? "emulated: this CPU has no bf16 instructions, so titan's AVX2 FMA kernel widens bf16 "
                                   "operands to f32 as it packs them (the same numbers, at about float32's speed)"
                                 : str(kernels::gemm_bf16_backend_name(), ", f32 accumulation");
  const char* attention =
      ops::attention_cpu_bf16_tiles() ? "attention on bf16 tiles" : "attention's tiles bf16-rounded on f32 FMAs";
  return str("bfloat16 compute (", kernel, "; ", attention, ", f32 softmax statistics); f32 master weights, ",
             "gradients, AdamW state, norms, softmax and loss");
}

}  // namespace titan::train
