#include "titan/models/llama/family.h"

#include "titan/models/decoder/family.h"

namespace titan::llama {

const models::ModelSpec& family() {
  static const models::ModelSpec spec = models::decoder_family(
      "llama", "Llama-style decoders from Hugging Face folders: Llama, Mistral and Qwen2 layouts", {},
      {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM"});
  return spec;
}

}  // namespace titan::llama
