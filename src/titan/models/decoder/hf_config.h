// config.json <-> DecoderConfig. `architectures` decides how the file reads:
//   Qwen3ForCausalLM   q/k RMSNorm; attention_bias -> q/k/v/o biases; head_dim default 128
//   Qwen2ForCausalLM   no q/k norm; q/k/v biases always, no o bias; head_dim = hidden / heads
//   LlamaForCausalLM   no q/k norm; attention_bias -> q/k/v/o biases; mlp_bias -> gate/up/down
//   MistralForCausalLM no q/k norm, no biases; sliding_window must be null (default 4096)
// Fields absent from the file take that architecture's transformers defaults, as
// AutoConfig.from_pretrained does (rope_theta 10000 for all four). RoPE scaling (rope_parameters
// or rope_scaling: default, linear, dynamic, yarn, llama3, longrope) is read as transformers reads
// it and its block written back unchanged by config_to_hf. Anything the decoder cannot represent
// exactly (another rope_type or a key it does not read, partial RoPE, an active sliding window,
// another activation or architecture) is a one-line error naming the file, the field and its value.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "titan/nn/decoder.h"

namespace titan::models {

// `source` names the file in error messages.
nn::DecoderConfig config_from_hf(const nlohmann::json& config, const std::string& source);

// The architecture a config is exported as when none is asked for: Qwen3ForCausalLM with q/k
// norm, Qwen2ForCausalLM with q/k/v biases only, LlamaForCausalLM otherwise.
std::string default_hf_architecture(const nn::DecoderConfig& config);

// The inverse of config_from_hf: a config.json that transformers' AutoModelForCausalLM loads as
// `architecture` and that config_from_hf reads back to `config`. `torch_dtype` is "float32" or
// "bfloat16". Throws when `architecture` cannot express `config` (e.g. Mistral with biases).
nlohmann::json config_to_hf(const nn::DecoderConfig& config, const std::string& architecture,
                            const std::string& torch_dtype);

}  // namespace titan::models
