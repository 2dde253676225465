// The Llama-style layouts the decoder also represents exactly, read from (and written back to)
// Hugging Face folders: LlamaForCausalLM (attention_bias, mlp_bias), MistralForCausalLM (no
// active sliding window) and Qwen2ForCausalLM (q/k/v biases, no q/k norm). No named sizes: a run
// builds them from a folder's config.json (empty model.name).
#pragma once

#include "titan/models/model_spec.h"

namespace titan::llama {

const models::ModelSpec& family();

}  // namespace titan::llama
