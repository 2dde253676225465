// config.json <-> DecoderConfig for Qwen3ForCausalLM. Fields absent from the file take
// transformers' Qwen3Config defaults, as AutoConfig.from_pretrained does; anything we do not
// support (rope scaling, sliding windows, another activation or architecture) is an error
// naming the field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "titan/nn/decoder.h"

namespace titan::qwen3 {

// `source` names the file in error messages.
nn::DecoderConfig config_from_hf(const nlohmann::json& config, const std::string& source);

}  // namespace titan::qwen3
