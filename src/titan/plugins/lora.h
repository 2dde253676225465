// LoRA through the override registry: lora_override() replaces the Linear nodes that
// `target_modules` selects with LoraLinear nodes (nn/lora.h), logged like any override.
#pragma once

#include <string>
#include <vector>

#include "titan/plugins/override_registry.h"

namespace titan::plugins {

struct LoraOptions {
  int64_t rank = 0;  // 0: no LoRA
  double alpha = 16.0;
  double dropout = 0.0;  // PEFT's lora_dropout: the adapters' input dropout in training
  // PEFT module names (q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj; a shared
  // expert's and its shared_expert_gate; the gated DeltaNet's in_proj_qkv, in_proj_z, in_proj_b,
  // in_proj_a, out_proj), "all-linear" (every one of them the model has: PEFT's all-linear, every
  // nn.Linear but the head), or globs over config-tree paths ("model.layers.*.attention.wq";
  // "model." may be left out).
  std::vector<std::string> target_modules = {"all-linear"};
};

// The override that puts LoraLinear nodes at the selected Linear nodes. Throws a one-line error
// for an unknown module name or a rank < 1.
Override lora_override(const LoraOptions& options);
// PEFT's target_parameters titan adapts: the fused expert stacks of every MoE layer.
inline constexpr const char* kExpertTargetParameters = "mlp.experts.gate_up_proj,mlp.experts.down_proj";
// The override that puts LoraExperts nodes at every MoE layer's Experts node (PEFT's
// target_parameters = [mlp.experts.gate_up_proj, mlp.experts.down_proj]); throws for rank < 1.
Override lora_experts_override(int64_t rank, double alpha);
// Throws a one-line error unless `target_parameters` is "" or kExpertTargetParameters (both; either
// order).
void check_target_parameters(const std::string& target_parameters);
// The config-tree globs `target_modules` stands for (each one a PEFT name, all-linear, or a glob).
std::vector<std::string> lora_target_patterns(const std::vector<std::string>& target_modules);
// The PEFT module names target_modules takes, comma-separated (for error lines).
std::string peft_module_names();

}  // namespace titan::plugins
