// Loading a model for inference (titan forward, titan generate) from a GGUF file (its config and
// tokenizer written to a temporary assets folder that lives as long as the LoadedModel, its
// weights dequantized from the file), or from either kind of folder:
//   a Hugging Face folder (config.json + *.safetensors [+ tokenizer.json, generation_config.json]),
//   optionally with a PEFT LoRA adapter folder on top; or
//   a native checkpoint step folder of a run (step-<N>/ with manifest.json): the model is rebuilt
//   from the run's config.toml saved in it and its weights restored; the run's
//   model.hf_assets_path is where its tokenizer.json / config.json live.
// One function, so an option that changes how a model is loaded serves both commands.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "titan/checkpoint/safetensors.h"
#include "titan/models/model_spec.h"
#include "titan/nn/decoder.h"
#include "titan/ops/quantize/quantize.h"

namespace titan::cli {

struct LoadedModel {
  std::unique_ptr<nn::Decoder> model;
  const models::ModelSpec* spec = nullptr;
  std::string assets_dir;  // tokenizer.json / generation_config.json / config.json; may be empty
  std::string label;        // "the model of DIR/config.json", for the memory check's errors
  std::string config_path;  // the file whose sizes the memory check's hint names
  double adapter_elements = 0;  // a PEFT adapter's rank x (in + out) over its projections
  std::string adapter_dir;
  std::shared_ptr<void> assets_lease;  // a GGUF's assets folder, removed when the last copy goes
};

// The activations an inference command holds besides the weights (train/memory_check.h):
// K and V of `rows` x `cache_positions`, and logits of `rows` x `logit_positions`. `batch`
// names what the user lowers when these tip the floor over.
struct InferenceSize {
  int64_t rows = 0, cache_positions = 0, logit_positions = 0;
  std::string batch = "the batch";
};

// `adapter_dir` (empty: none) applies to Hugging Face folders only; `base_quant` stores its base's
// linear weights quantized (QLoRA; with an adapter only). Throws a one-line
// titan::Error naming the folder when it is neither kind or cannot be read, and a
// config::ConfigError (exit 2) before building anything when the weights (+ adapter) and `size`
// exceed the memory this machine has available.
LoadedModel load_inference_model(const std::string& dir, const std::string& adapter_dir = "",
                                 const InferenceSize& size = {},
                                 std::optional<ops::QuantKind> base_quant = std::nullopt);
// The same memory check for a loaded model once its batch is known (generate: after tokenizing).
void check_inference_memory(const LoadedModel& loaded, const InferenceSize& size);

// Tensor `name` of a tokens file (input_ids, labels, attention_mask) as i64 [B, T]; I32 is widened.
// Throws naming the file when it is missing or not a non-empty [B, T] I64/I32 tensor.
Tensor read_token_ids(const ckpt::SafetensorsFile& file, const std::string& name);

// The end-of-sequence ids of a model folder, as HF generate takes them: generation_config.json's
// eos_token_id, else config.json's (an integer or a list; absent or null: none).
std::vector<int64_t> read_eos_ids(const std::string& assets_dir);
// The padding id of finished rows: generation_config.json's pad_token_id, else config.json's, else
// the first eos id (what HF generate falls back to), else 0.
int64_t read_pad_id(const std::string& assets_dir, const std::vector<int64_t>& eos_ids);

}  // namespace titan::cli
