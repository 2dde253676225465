// The model-family seam (torchtitan's ModelSpec): everything the trainer, the parallel layer and
// the CLI need to know about a family, so that none of them names one. A family is plain data plus
// functions, registered in one explicit list (models/builtin.cpp); adding a family is its own
// folder plus one line there (docs/design.md, "Adding a model family").
//
// A family owns its structure: config_tree says which node, and so which module type, stands at
// each path of its model, and a family may put module types of its own there, registered in
// nn::module_registry() like a plugin's (nn/module.h); build walks that tree. Every model is
// built through build_model(spec, config), so titan train, the parallel layer's gathers, convert,
// forward/generate and the demo all build the family's own structure. Today's families use the
// generic decoder (nn::Decoder, its tree nn::decoder_config_tree); what differs is their named
// sizes, the Hugging Face layouts they read and write, their parallel plan, init and config
// functions. The shared machinery for decoder families lives in models/decoder/ and a family
// points its fields at it (or at its own functions).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "titan/config/registry.h"
#include "titan/nn/decoder.h"

namespace titan::models {

// A named size of a family ("debug", "0.6B", "30B-A3B"): the --model.name value.
struct NamedSize {
  std::string name;
  std::string summary;
  nn::DecoderConfig config;
};

// What `save_hf_folder` writes besides the tensors.
struct HfExportOptions {
  std::string dtype = "float32";            // float32 | bfloat16 (round to nearest even)
  int64_t max_shard_bytes = 5'000'000'000;  // of tensor data per shard ("5GB", HF's default)
  // Copied where present: tokenizer.json, tokenizer_config.json, special_tokens_map.json,
  // vocab.json, merges.txt, generation_config.json. Its config.json, if any, lends the token ids
  // (bos/eos/pad_token_id) that the model config cannot know. Empty: none.
  std::string tokenizer_dir;
  std::string architecture;  // empty: the family's default for the config
  // The HF folder the model was imported from (empty: none). A multimodal Qwen3.5 export
  // (Qwen3_5(Moe)ForConditionalGeneration) takes from it what titan does not train: the vision tower
  // and MTP tensors, copied unchanged, and config.json's fields beside text_config.
  std::string source_dir = "";
  // A non-empty out_dir that is not an HF model folder is replaced only with `overwrite`, the
  // user's `overwrite_flag` (checkpoint/output_folder.h); otherwise the export is refused.
  bool overwrite = false;
  std::string overwrite_flag = "--overwrite";
};

// The Hugging Face state-dict adapter: config.json in and out, parameter names (tied weights and
// stacked experts included), whole folders in and out.
struct HfAdapter {
  std::vector<std::string> architectures;  // config.json `architectures` values this family reads
  // dir/config.json as AutoConfig reads it; one-line errors naming the file and field.
  nn::DecoderConfig (*read_config)(const std::string& dir) = nullptr;
  // An HF folder's weights into `model` (shapes and the math config.json states checked; missing
  // and unexpected keys listed).
  void (*load_weights)(nn::Decoder& model, const std::string& dir) = nullptr;
  // The model as an HF folder (atomic: built beside out_dir, swapped in whole).
  void (*save_folder)(const nn::Decoder& model, const std::string& out_dir, const HfExportOptions& options) = nullptr;
  // architectures[0] of dir/config.json ("" without one): what an export of a model imported from
  // `dir` is written as (a Mistral folder would otherwise go out as Llama).
  std::string (*architecture_of)(const std::string& dir) = nullptr;
  // The HF tensors of a parameter's value or gradient, as views of it.
  std::vector<std::pair<std::string, Tensor>> (*to_hf_tensors)(const std::string& fqn, const Tensor& t) = nullptr;
};

// Which dimension of each parameter tensor parallelism splits (Megatron style), by FQN.
struct ParallelPlan {
  // 0 or 1: the dimension split across tp ranks; -1: replicated. Throws for an FQN that is not
  // tensor-parallel yet.
  int (*tp_split_dim)(const std::string& fqn) = nullptr;
  // The parts of the split dimension each rank takes a share of (core/slices.h), for `full`'s
  // parameter `fqn`: empty for one part; a fused projection's parts (the DeltaNet's [q | k | v]).
  std::vector<int64_t> (*tp_sections)(const nn::DecoderConfig& full, const std::string& fqn) = nullptr;
  // True when a replicated parameter's gradient is a partial sum on each tp rank.
  bool (*tp_grad_is_partial)(const std::string& fqn, bool sequence_parallel) = nullptr;
  // The config one rank of `tp` builds (heads, FFN width, vocabulary divided); throws naming
  // what does not divide.
  nn::DecoderConfig (*tp_local_config)(const nn::DecoderConfig& full, int64_t tp) = nullptr;
};

struct ModelSpec {
  std::string name;  // "qwen3"
  std::string summary;
  std::vector<NamedSize> sizes;
  HfAdapter hf;
  ParallelPlan parallel_plan;
  // The family's structure for `config`: a node per module path (its module types, titan's or the
  // family's own); overrides then replace nodes of it.
  nn::ConfigTree (*config_tree)(const nn::DecoderConfig& config) = nullptr;
  // Builds the model from its config tree (override replacements applied).
  std::unique_ptr<nn::Decoder> (*build)(const nn::DecoderConfig& config, const nn::ConfigTree& tree) = nullptr;
  // Random init from `seed`; each parameter draws from its own stream keyed by its FQN.
  void (*init_weights)(nn::Decoder& model, uint64_t seed) = nullptr;
  // Training FLOPs per token at `seq_len` (for TFLOPs and MFU).
  double (*flops_per_token)(const nn::DecoderConfig& config, int64_t seq_len) = nullptr;
  // Its named config functions (titan train --config NAME).
  std::vector<config::ConfigEntry> (*configs)() = nullptr;

  const NamedSize* find_size(const std::string& size_name) const;
};

// The family's model for `config`, built from its own tree (no overrides): the one way titan
// builds a model outside a training run's setup.
std::unique_ptr<nn::Decoder> build_model(const ModelSpec& spec, const nn::DecoderConfig& config);

// A model a run trains: its family and its config.
struct ResolvedModel {
  const ModelSpec* spec = nullptr;
  nn::DecoderConfig config;
};

}  // namespace titan::models
