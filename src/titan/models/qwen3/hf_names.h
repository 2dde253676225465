// The one table between our FQNs (the module tree, torchtitan-style) and Hugging Face
// parameter names. HF names appear only here and in checkpoint code.
#pragma once

#include <optional>
#include <string>

namespace titan::qwen3 {

// "layers.3.attention.wq.weight" -> "model.layers.3.self_attn.q_proj.weight". Throws for an
// FQN the table does not know (a programming error, not user input).
std::string to_hf_name(const std::string& fqn);
// The inverse; nullopt for names that are not Qwen3 parameters.
std::optional<std::string> from_hf_name(const std::string& hf_name);

}  // namespace titan::qwen3
