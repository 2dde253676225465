// A decoder model as a GGUF file (llama.cpp, Ollama, LM Studio), both ways, with the metadata,
// tensor names and tokenizer that llama.cpp's own converter (convert_hf_to_gguf.py) writes for the
// Hugging Face folder of the same model (tools/make_gguf_fixtures.py compares them):
//   Qwen3ForCausalLM       -> qwen3      Qwen3MoeForCausalLM -> qwen3moe
//   LlamaForCausalLM, MistralForCausalLM -> llama (q/k rows permuted to llama.cpp's interleaved
//                            RoPE; Llama 3 RoPE scaling as the rope_freqs tensor)
//   Qwen2ForCausalLM       -> qwen2
// Anything else is one line naming the architecture.
//
// In, a GGUF stands for a Hugging Face folder: GgufModel gives the config.json, tokenizer.json,
// tokenizer_config.json and generation_config.json it implies (write_assets puts them in a folder,
// so every reader of a model folder reads them), and its tensors under their HF names, dequantized
// to f32 (GgufWeights, the ckpt::TensorSource that load_hf_weights reads). A tokenizer is
// rebuilt for tokenizer.ggml.model "gpt2" (byte-level BPE) with a pre-tokenizer llama.cpp names
// qwen2 or llama-bpe; any other is one line naming it (pass the model's tokenizer.json instead).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "titan/checkpoint/gguf.h"
#include "titan/checkpoint/hf_folder.h"
#include "titan/nn/decoder.h"

namespace titan::models {

struct GgufExportOptions {
  std::string dtype = "f32";  // f32 | f16 | bf16 | q8_0 (1-D tensors stay f32, as the converter writes)
  std::string architecture;   // the HF architecture; empty: the config's default (hf_config.h)
  // tokenizer.json, tokenizer_config.json (chat template, special tokens), config.json's token
  // ids; required: a GGUF without a tokenizer does not run in llama.cpp.
  std::string tokenizer_dir;
  std::string name;           // general.name; empty: the output file's stem
  // The HF folder the model came from (empty: none): its config.json decides what the converter
  // would have read from it (whether head_dim is stated).
  std::string source_dir;
  // An existing out_path is replaced only with `overwrite` (the user's --overwrite), or when it is a
  // GGUF and `replace_gguf` (a run's own export, <checkpoint folder>/model.gguf, written before).
  bool overwrite = false;
  bool replace_gguf = false;
};

// Writes `model` (LoRA adapters merged) as one GGUF file, under a temporary name renamed over
// out_path; an existing out_path is replaced only as options say, never when it is not a regular file.
void save_gguf(const nn::Decoder& model, const std::string& out_path, const GgufExportOptions& options);

class GgufModel {
 public:
  static std::shared_ptr<const GgufModel> open(const std::string& path);

  const ckpt::GgufFile& file() const { return file_; }
  const std::string& path() const { return file_.path(); }
  const nlohmann::json& config() const { return config_; }  // config.json
  nn::DecoderConfig decoder_config() const;
  // config.json, tokenizer.json, tokenizer_config.json, generation_config.json into `dir` (which
  // exists): the model folder of this file without its weights.
  void write_assets(const std::string& dir) const;
  // write_assets into a fresh folder under $TMPDIR (its path in *dir), removed when the returned
  // lease is released: what the commands other than train read a GGUF's folder from.
  std::shared_ptr<void> write_temp_assets(std::string* dir) const;

  // The GGUF tensor behind HF tensor `name`, and how to read it.
  struct Source {
    const ckpt::GgufTensorInfo* tensor = nullptr;
    int64_t expert = -1;         // a slice of a stacked experts tensor
    int64_t permute_heads = 0;   // llama.cpp's q/k row order to undo (heads), 0: none
    Shape shape;                 // the HF tensor's
  };
  const std::map<std::string, Source>& sources() const { return sources_; }
  Tensor read(const std::string& name) const;  // f32, the HF layout
  // A 2-D tensor's rows as the file stores them (u8 [rows * row bytes], llama.cpp's q/k row order
  // undone), and its type: what a gguf-quantized base weight keeps.
  Tensor read_blocks(const std::string& name, GgmlType* type) const;

 private:
  ckpt::GgufFile file_;
  std::string arch_;
  nlohmann::json config_, tokenizer_, tokenizer_config_, generation_config_;
  std::map<std::string, Source> sources_;
};

// A GGUF file's tensors under their HF names (what load_hf_weights reads from a folder).
class GgufWeights : public ckpt::TensorSource {
 public:
  explicit GgufWeights(std::shared_ptr<const GgufModel> model);
  std::vector<std::string> names() const override;
  const ckpt::TensorInfo* find(const std::string& name) const override;
  Tensor get(const std::string& name) const override;
  std::string file_of(const std::string& name) const override;
  void release(const std::string& name) const override;
  const GgufModel& model() const { return *model_; }

 private:
  std::shared_ptr<const GgufModel> model_;
  std::map<std::string, ckpt::TensorInfo> infos_;
};

// A model folder (an HF folder) or a GGUF file as the weights load_hf_weights reads.
std::unique_ptr<ckpt::TensorSource> open_weights(const std::string& dir_or_gguf);

}  // namespace titan::models
