#include "titan/config/registry.h"

#include "titan/config/qwen3_configs.h"

namespace titan::config {

JobConfig base_config() {
  // Nothing beyond the struct defaults is shared yet; settings every run wants go here, so that
  // each config function only states how it differs.
  return JobConfig{};
}

static std::vector<ConfigEntry>& entries() {
  static std::vector<ConfigEntry> entries = {
      {"qwen3_debug", "quickstart: the debug model (4 layers, dim 256) on the built-in dataset, 160 steps",
       &qwen3_debug},
      {"qwen3_0_6b", "Qwen3-0.6B, seq_len 4096, assets in ./assets/hf/Qwen3-0.6B", &qwen3_0_6b},
      {"qwen3_1_7b", "Qwen3-1.7B, seq_len 4096, assets in ./assets/hf/Qwen3-1.7B", &qwen3_1_7b},
      {"qwen3_4b", "Qwen3-4B, seq_len 4096, assets in ./assets/hf/Qwen3-4B", &qwen3_4b},
      {"qwen3_8b", "Qwen3-8B, seq_len 4096, assets in ./assets/hf/Qwen3-8B", &qwen3_8b},
      {"qwen3_14b", "Qwen3-14B, seq_len 4096, assets in ./assets/hf/Qwen3-14B", &qwen3_14b},
      {"qwen3_32b", "Qwen3-32B, seq_len 4096, assets in ./assets/hf/Qwen3-32B", &qwen3_32b},
      {"qwen3_30b_a3b_reduced",
       "Qwen3-30B-A3B reduced to 4 layers, 64 experts, top-4 (the seed's MoE run), assets in ./assets/hf/Qwen3-30B-A3B",
       &qwen3_30b_a3b_reduced},
      {"qwen3_4b_finetune",
       "fine-tune Qwen3-4B: import ./assets/hf/Qwen3-4B (HF), lr 2e-5, 1000 steps, checkpoints, bf16 HF export",
       &qwen3_4b_finetune},
      {"qwen3_debug_finetune",
       "test twin of qwen3_4b_finetune: the tiny HF folder ./assets/hf/tiny-qwen3 imported, 20 steps",
       &qwen3_debug_finetune},
  };
  return entries;
}

const std::vector<ConfigEntry>& config_registry() { return entries(); }

void add_config_function(ConfigEntry entry) {
  for (const ConfigEntry& e : entries()) {
    if (e.name == entry.name) {
      config_fail("--module: config function '", entry.name, "' is already registered; a plugin must name its own");
    }
  }
  entries().push_back(std::move(entry));
}

const ConfigEntry& find_config(const std::string& name) {
  std::string known;
  for (const ConfigEntry& entry : config_registry()) {
    if (entry.name == name) return entry;
    known += (known.empty() ? "" : ", ") + entry.name;
  }
  config_fail("--config: unknown config function '", name, "'; use one of ", known);
}

}  // namespace titan::config
