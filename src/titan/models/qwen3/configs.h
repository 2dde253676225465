// The Qwen3 family's config functions (registered through its ModelSpec: qwen3/family.cpp).
// Each starts from base_config() and sets what differs; callable directly (tests, tools) as well
// as by name through the registry.
#pragma once

#include <vector>

#include "titan/config/job_config.h"
#include "titan/config/registry.h"

namespace titan::qwen3 {

using config::JobConfig;

// Every function below, with its --config name and one-line summary.
std::vector<config::ConfigEntry> config_functions();

JobConfig qwen3_debug();  // the quickstart: debug model, built-in dataset, minutes on a CPU
JobConfig qwen3_0_6b();
JobConfig qwen3_1_7b();
JobConfig qwen3_4b();
JobConfig qwen3_8b();
JobConfig qwen3_14b();
JobConfig qwen3_32b();
JobConfig qwen3_30b_a3b_reduced();  // 4 layers, 64 experts, top-4
// Fine-tuning published weights (the seed's flow): import an HF folder, checkpoint, export HF.
JobConfig qwen3_4b_finetune();
JobConfig qwen3_4b_lora();  // the same as LoRA: r 16, bf16 base, activation checkpointing
JobConfig qwen3_debug_finetune();  // its reduced twin for tests: the debug model, 20 steps

}  // namespace titan::qwen3
