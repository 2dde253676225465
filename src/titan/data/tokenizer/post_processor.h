// tokenizer.json "post_processor": the special tokens HF's encode(add_special_tokens=True) puts
// around one sequence. titan encodes single sequences only, so what it keeps is the single
// template's ids before and after the sequence; a pair template is parsed and checked all the same.
//   null, ByteLevel (offsets only)          -> nothing added (Qwen3, GPT-2)
//   TemplateProcessing                      -> the "single" template's special tokens (Llama 2/3)
//   Sequence of the above (one template)    -> as that template
// Anything else (BertProcessing, RobertaProcessing, ...) is refused by name.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "titan/data/tokenizer/json_reader.h"

namespace titan::data {

struct SequenceSpecials {
  std::vector<int32_t> prefix;  // ids before the sequence ("<s>", "<|begin_of_text|>")
  std::vector<int32_t> suffix;  // ids after it
};

// `node` may be null (no post-processor).
SequenceSpecials read_post_processor(const JsonReader& r, const nlohmann::json* node);

}  // namespace titan::data
