// Hugging Face folders as the start and the end of a training run (the seed's initial_load_in_hf
// and last_save_in_hf): which model to build, loading published weights into it, and writing the
// trained model back as a folder that transformers' AutoModelForCausalLM loads with no conversion.
#pragma once

#include <cstdint>
#include <string>

#include "titan/nn/decoder.h"

namespace titan::qwen3 {

// The model a run builds. A spec name ("debug", "4B", ...) gives that spec; an empty one gives
// hf_dir/config.json read as AutoConfig does (architecture from `architectures`, every field from
// the file or its class default). n_layers > 0 then overrides the depth (model.n_layers).
nn::DecoderConfig model_config_for(const std::string& spec_name, const std::string& hf_dir, int64_t n_layers = 0);

// Loads an HF folder's weights (single or sharded safetensors; F32, BF16 or F16, converted to
// f32) into `model`. Checks every shape, lists missing and unexpected keys (a tied model's absent
// lm_head.weight is the only allowed absence), and, when the folder has a config.json, checks that
// the fields shapes cannot reveal (rope_theta, rms_norm_eps, q/k norm, biases, tying) match.
void load_initial_hf(nn::Decoder& model, const std::string& dir);

// architectures[0] of dir/config.json ("" when the folder has none): what an export of a model
// imported from `dir` should be written as (a Mistral folder is otherwise exported as Llama).
std::string hf_architecture(const std::string& dir);

struct HfExportOptions {
  std::string dtype = "float32";     // float32 | bfloat16 (round to nearest even)
  int64_t max_shard_bytes = 5'000'000'000;  // of tensor data per shard ("5GB", HF's default)
  // Copied where present: tokenizer.json, tokenizer_config.json, special_tokens_map.json,
  // vocab.json, merges.txt, generation_config.json. Its config.json, if any, lends the token ids
  // (bos/eos/pad_token_id) that the model config cannot know. Empty: none.
  std::string tokenizer_dir;
  std::string architecture;  // empty: default_hf_architecture(config)
};

// Writes out_dir/{config.json, model.safetensors | model-0000i-of-0000n.safetensors +
// model.safetensors.index.json, tokenizer files}. Tensors carry HF names; a tied model writes no
// lm_head.weight. The folder is built under "<out_dir>.tmp.<pid>" and swapped in whole, so an
// existing out_dir is replaced only once the new one is complete, and a failure leaves it as it was.
void save_hf_folder(const nn::Decoder& model, const std::string& out_dir, const HfExportOptions& options = {});

}  // namespace titan::qwen3
