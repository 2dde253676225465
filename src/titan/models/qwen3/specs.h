// Named Qwen3 sizes, dense and mixture-of-experts. The published ones are taken from their Hugging Face config.json
// files (Qwen/Qwen3-*); `debug` is ours, small enough for tests and the quickstart.
#pragma once

#include <string>
#include <vector>

#include "titan/models/model_spec.h"

namespace titan::qwen3 {

using Spec = models::NamedSize;

const std::vector<Spec>& specs();
// Throws listing the known names when `name` is not one of them.
const Spec& find_spec(const std::string& name);

}  // namespace titan::qwen3
