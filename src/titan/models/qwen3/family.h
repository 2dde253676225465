// The Qwen3 family, dense and mixture-of-experts: its named sizes (specs.h), the Hugging Face
// architectures Qwen3ForCausalLM and Qwen3MoeForCausalLM, and its config functions (configs.h).
#pragma once

#include "titan/models/model_spec.h"

namespace titan::qwen3 {

const models::ModelSpec& family();

}  // namespace titan::qwen3
