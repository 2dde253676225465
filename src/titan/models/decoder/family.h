// A ModelSpec for a family of the generic decoder (nn::Decoder): every function field points at
// the shared decoder machinery of this folder (HF config.json and names, torchtitan's init, the
// Megatron plan, torchtitan's FLOPs count); the family brings its name, sizes, HF architectures and
// config functions.
#pragma once

#include "titan/models/model_spec.h"

namespace titan::models {

ModelSpec decoder_family(std::string name, std::string summary, std::vector<NamedSize> sizes,
                         std::vector<std::string> hf_architectures,
                         std::vector<config::ConfigEntry> (*configs)() = nullptr);

}  // namespace titan::models
