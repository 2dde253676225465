// Hugging Face folders as the start and the end of a training run (the seed's initial_load_in_hf
// and last_save_in_hf): which model to build, loading published weights into it, and writing the
// trained model back as a folder that transformers' AutoModelForCausalLM loads with no conversion.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "titan/checkpoint/output_folder.h"
#include "titan/models/model_spec.h"

namespace titan::models {

// Loads an HF folder's weights (single or sharded safetensors; F32, BF16 or F16, converted to
// f32) into `model`. Checks every shape, lists missing and unexpected keys (a tied model's absent
// lm_head.weight is the only allowed absence), and, when the folder has a config.json, checks that
// the fields shapes cannot reveal (rope_theta, rms_norm_eps, q/k norm, biases, tying) match.
void load_initial_hf(nn::Decoder& model, const std::string& dir);

// architectures[0] of dir/config.json ("" when the folder has none): what an export of a model
// imported from `dir` should be written as (a Mistral folder is otherwise exported as Llama).
std::string hf_architecture(const std::string& dir);

// The name a text-model tensor (to_hf_tensors' "model.layers.0...") has in a folder of
// `architecture` (config.json's architectures[0]): "model.language_model.X" in a multimodal
// Qwen3.5 folder, unchanged elsewhere. The export and forward --grads both name tensors so.
std::string folder_tensor_name(const std::string& architecture, const std::string& name);

// HfExportOptions: models/model_spec.h.

// Writes out_dir/{config.json, model.safetensors | model-0000i-of-0000n.safetensors +
// model.safetensors.index.json, tokenizer files}. Tensors carry HF names; a tied model writes no
// lm_head.weight. The folder is built under "<out_dir>.tmp.<pid>" and swapped in whole, so an
// existing out_dir is replaced only once the new one is complete, and a failure leaves it as it was.
// An existing out_dir must be an HF model folder (or options.overwrite): nothing else is deleted.
void save_hf_folder(const nn::Decoder& model, const std::string& out_dir, const HfExportOptions& options = {});

// The folder write save_hf_folder uses: `write(tmp)` fills "<out.path>.tmp.<pid>", which then
// replaces out.path whole (or is removed when `write` throws, out.path untouched). A destination
// that output_folder_problem refuses (not empty, not an earlier output of out.kind, no overwrite)
// is an error before anything is written.
void write_folder_atomic(const ckpt::OutputFolder& out, const std::function<void(const std::string& tmp)>& write);

}  // namespace titan::models
