// The tokens the packing loader, `titan tokenize` and `titan generate --prompt` put around a
// text, read from a Hugging Face tokenizer folder: the end-of-text separator (loader only) and the
// special tokens HF's encode(add_special_tokens=True) adds (BOS for Llama, nothing for Qwen3).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

struct DocumentTokens {
  int32_t eot_id = -1;           // appended to every document
  std::vector<int32_t> prefix;   // before every document (BOS), as sequence_specials_from_folder
  std::vector<int32_t> suffix;   // after it, before eot
};

struct SequenceTokens {
  std::vector<int32_t> prefix;
  std::vector<int32_t> suffix;
};

// What HF's encode(add_special_tokens=True) puts around one sequence for the folder `dir`:
// tokenizer.json's post_processor (Tokenizer::special_prefix / special_suffix), except that where
// tokenizer_config.json sets add_bos_token / add_eos_token to true or false (the Llama and Gemma
// tokenizer classes of transformers rebuild the template from them), that side is [bos_token] or
// nothing. Throws naming the file and field when the config is malformed.
SequenceTokens sequence_tokens_from_folder(const std::string& dir, const Tokenizer& tokenizer);

// `dir`: the folder holding tokenizer.json and (optionally) tokenizer_config.json.
// eot: "<|endoftext|>" when the vocabulary has it (the pretraining separator of Qwen and GPT-2
// style tokenizers), else the config's eos_token. prefix / suffix: sequence_tokens_from_folder.
// Throws naming the file and field when the config is malformed or names a token the vocabulary lacks.
DocumentTokens document_tokens_from_folder(const std::string& dir, const Tokenizer& tokenizer);

}  // namespace titan::data
