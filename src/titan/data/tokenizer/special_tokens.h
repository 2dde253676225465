// The tokens the packing loader puts around each document, read from a Hugging Face
// tokenizer folder: the end-of-text separator and, where tokenizer_config.json asks for it
// (add_bos_token), a BOS token.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "titan/data/tokenizer/tokenizer.h"

namespace titan::data {

struct DocumentTokens {
  int32_t eot_id = -1;             // appended to every document
  std::optional<int32_t> bos_id;   // prepended when the config asks for it
};

// `dir`: the folder holding tokenizer.json and (optionally) tokenizer_config.json.
// eot: "<|endoftext|>" when the vocabulary has it (the pretraining separator of Qwen and GPT-2
// style tokenizers), else the config's eos_token. bos: the config's bos_token when add_bos_token
// is true. Throws naming the file and field when the config is malformed or names a token the
// vocabulary lacks.
DocumentTokens document_tokens_from_folder(const std::string& dir, const Tokenizer& tokenizer);

}  // namespace titan::data
