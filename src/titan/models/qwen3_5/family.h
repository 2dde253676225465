// The Qwen3.5 family (the current Qwen line): hybrid layers of gated DeltaNet linear attention
// (nn/gated_delta_net.h) and output-gated full attention with partial RoPE, zero-centred RMSNorms;
// the Hugging Face architectures Qwen3_5ForCausalLM (text folders) and
// Qwen3_5ForConditionalGeneration (the multimodal folders as published, read as text models: the
// language model under model.language_model.*, the vision tower and MTP tensors left out). The
// shared decoder machinery (models/decoder/) carries it: its config fields select the blocks.
#pragma once

#include "titan/models/model_spec.h"

namespace titan::qwen3_5 {

const models::ModelSpec& family();

// A reduced Qwen3.5 for tests and the quickstart: 4 layers (3 gated DeltaNet, 1 full attention),
// dim 256 (model.name debug_qwen3_5).
nn::DecoderConfig debug_config();

}  // namespace titan::qwen3_5
