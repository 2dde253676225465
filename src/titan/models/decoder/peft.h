// LoRA adapters as Hugging Face PEFT folders (what peft's save_pretrained writes and
// PeftModel.from_pretrained reads on top of the base model): adapter_config.json +
// adapter_model.safetensors, tensors named base_model.model.<HF module>.lora_A.weight [r, in] and
// .lora_B.weight [out, r]; the update is (lora_alpha / r) * B A, as nn::LoraLinear computes it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "titan/checkpoint/output_folder.h"
#include "titan/models/model_spec.h"
#include "titan/ops/quantize/quantize.h"

namespace titan::models {

struct PeftAdapter {
  std::string dir;
  int64_t rank = 0;
  double alpha = 0.0;
  // The config-tree paths of the adapted Linear nodes ("model.layers.0.attention.wq"), from the
  // tensor names.
  std::vector<std::string> modules;
  // The config-tree paths of the adapted Experts nodes ("model.layers.0.moe.experts"): PEFT's
  // target_parameters [mlp.experts.gate_up_proj, mlp.experts.down_proj] (nn::LoraExperts).
  std::vector<std::string> experts;
};

// Reads dir/adapter_config.json and the tensor names of dir/adapter_model.safetensors. One-line
// errors for a missing file, a non-LoRA or DoRA / rsLoRA / per-module-rank adapter, a bias or
// modules_to_save, and tensor names that are not a Qwen3 projection's lora_A / lora_B.
PeftAdapter read_peft_adapter(const std::string& dir);

// Copies the adapter's tensors into `model` (built with LoraLinear nodes at adapter.modules);
// every shape checked against the base: a mismatch names the tensor, both shapes and the fix.
void load_peft_weights(nn::Decoder& model, const PeftAdapter& adapter);

// The HF folder `dir` (config.json + safetensors) with `adapter_dir`'s adapter on it (empty: none):
// LoraLinear nodes where the adapter has tensors, base and adapter weights loaded. With
// `base_quant` (an adapter needed) the base is frozen, its linear weights stored quantized.
std::unique_ptr<nn::Decoder> load_hf_model_with_adapter(const ModelSpec& spec, const std::string& dir,
                                                         const std::string& adapter_dir,
                                                         std::optional<ops::QuantKind> base_quant = std::nullopt);

// Writes `model`'s adapters as a PEFT folder at dir.path (atomically: a temporary folder swapped
// in; an existing folder only when it is an earlier adapter output or dir.overwrite, see
// checkpoint/output_folder.h). target_modules lists the adapted HF modules by full name, so PEFT
// adapts exactly those.
void save_peft_adapter(nn::Decoder& model, const ckpt::OutputFolder& dir, int64_t rank, double alpha,
                       const std::string& base_model_name_or_path);

}  // namespace titan::models
