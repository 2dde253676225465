// Building a Qwen3 model: random initialization (torchtitan's scheme) or weights from a
// Hugging Face folder (config.json + safetensors).
#pragma once

#include <memory>
#include <string>

#include "titan/nn/decoder.h"

namespace titan::models {

// Initializes every parameter from `seed` (each parameter draws from its own stream keyed by
// its FQN, so the result does not depend on construction order or thread count):
//  - wq, wk, wv, w1: truncated normal, std 0.02 (cut at +-2, as torch.nn.init.trunc_normal_);
//  - wo, w2, w3: std 0.02 / sqrt(2 * (layer + 1)) (depth-scaled);
//  - MoE: router and experts' w1 like w1, experts' w2/w3 like w2/w3; the expert bias 0;
//  - output head: std dim^-0.5, cut at 3 std; a tied embedding takes this init;
//  - untied embedding: normal std 1; norms 1; biases 0.
void init_weights(nn::Decoder& model, uint64_t seed);

// Reads DIR/config.json.
nn::DecoderConfig load_hf_config(const std::string& dir);
// Copies DIR's safetensors weights into `model` (converted to f32); stacked expert weights
// [E, ...] gather one HF tensor per expert. Every parameter must be present with its exact shape; keys we do not know are an error listing them; a tied model may
// omit lm_head.weight (and if present it must equal the embedding).
void load_hf_weights(nn::Decoder& model, const std::string& dir);
// load_hf_config + build + load_hf_weights.
std::unique_ptr<nn::Decoder> load_hf_model(const std::string& dir);

}  // namespace titan::models
