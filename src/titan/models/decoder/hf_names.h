// The one table between our FQNs (the module tree, torchtitan-style) and Hugging Face
// parameter names. HF names appear only here and in checkpoint code.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "titan/core/tensor.h"

namespace titan::models {

// "layers.3.attention.wq.weight" -> "model.layers.3.self_attn.q_proj.weight". Throws for an
// FQN the table does not know (a programming error, not user input).
std::string to_hf_name(const std::string& fqn);
// The HF tensors of a parameter's value (or gradient) `t`, as views of it: {to_hf_name(fqn), t},
// except for a stacked expert weight ("layers.3.moe.experts.w1" [E, F, D]), which is one tensor per
// expert, {"model.layers.3.mlp.experts.<e>.gate_proj.weight", t.select(e)} for e = 0..E-1.
std::vector<std::pair<std::string, Tensor>> to_hf_tensors(const std::string& fqn, const Tensor& t);
// The inverse (an expert's tensor maps to its stacked parameter); nullopt for names that are not
// Qwen3 parameters.
std::optional<std::string> from_hf_name(const std::string& hf_name);

}  // namespace titan::models
