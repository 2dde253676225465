#include "titan/models/qwen3/family.h"

#include "titan/models/decoder/family.h"
#include "titan/models/qwen3/configs.h"
#include "titan/models/qwen3/specs.h"

namespace titan::qwen3 {

const models::ModelSpec& family() {
  static const models::ModelSpec spec =
      models::decoder_family("qwen3", "Qwen3 dense (0.6B .. 32B) and mixture-of-experts (30B-A3B, 235B-A22B)",
                             specs(), {"Qwen3ForCausalLM", "Qwen3MoeForCausalLM"}, &config_functions);
  return spec;
}

}  // namespace titan::qwen3
