#include "titan/plugins/lora.h"

#include <map>

#include "titan/core/error.h"
#include "titan/nn/lora.h"

namespace titan::plugins {

// PEFT's module names -> the Linear nodes they are in titan's tree (PEFT matches a name at the end
// of a module path, so gate_proj is also a shared expert's; Qwen3.5's gated DeltaNet brings its own).
static const std::map<std::string, std::vector<std::string>>& peft_names() {
  static const std::map<std::string, std::vector<std::string>> names = {
      {"q_proj", {"attention.wq"}},
      {"k_proj", {"attention.wk"}},
      {"v_proj", {"attention.wv"}},
      {"o_proj", {"attention.wo"}},
      {"gate_proj", {"feed_forward.w1", "moe.shared_expert.w1"}},
      {"up_proj", {"feed_forward.w3", "moe.shared_expert.w3"}},
      {"down_proj", {"feed_forward.w2", "moe.shared_expert.w2"}},
      {"shared_expert_gate", {"moe.shared_expert_gate"}},
      {"in_proj_qkv", {"attention.in_proj_qkv"}},
      {"in_proj_z", {"attention.in_proj_z"}},
      {"in_proj_b", {"attention.in_proj_b"}},
      {"in_proj_a", {"attention.in_proj_a"}},
      {"out_proj", {"attention.out_proj"}}};
  return names;
}

std::string peft_module_names() {
  std::string out;
  for (const auto& [peft, nodes] : peft_names()) out += (out.empty() ? "" : ", ") + peft;
  return out;
}

std::vector<std::string> lora_target_patterns(const std::vector<std::string>& target_modules) {
  TITAN_CHECK(!target_modules.empty(), "[lora] target_modules is empty. HINT: all-linear, or PEFT names such as q_proj,v_proj");
  std::vector<std::string> patterns;
  const auto add = [&](const std::vector<std::string>& nodes) {
    for (const std::string& node : nodes) patterns.push_back("model.layers.*." + node);
  };
  for (const std::string& t : target_modules) {
    if (t == "all-linear") {
      for (const auto& [peft, nodes] : peft_names()) add(nodes);
    } else if (peft_names().count(t)) {
      add(peft_names().at(t));
    } else if (t.find_first_of(".*?[") != std::string::npos) {
      patterns.push_back(t.starts_with("model.") ? t : "model." + t);
    } else {
      TITAN_FAIL("[lora] target module '", t, "' is not a PEFT name (", peft_module_names(),
                 "), all-linear, or a glob over config-tree paths such as model.layers.*.attention.wq");
    }
  }
  return patterns;
}

Override lora_override(const LoraOptions& options) {
  TITAN_CHECK(options.rank >= 1, "[lora] lora.rank ", options.rank, " must be >= 1");
  TITAN_CHECK(options.alpha > 0.0, "[lora] lora.alpha ", options.alpha, " must be > 0");
  Override o;
  o.name = "lora";
  o.target_type = nn::LinearConfig::kType;
  o.exact = true;
  o.fqn_patterns = lora_target_patterns(options.target_modules);
  o.description = "LoRA adapters (rank " + std::to_string(options.rank) + ") on the selected projections";
  o.factory = [rank = options.rank, alpha = options.alpha,
               dropout = options.dropout](const nn::NodeConfig& node) -> std::shared_ptr<const nn::NodeConfig> {
    auto lora = derive<nn::LoraLinearConfig>(dynamic_cast<const nn::LinearConfig&>(node));
    lora->rank = rank;
    lora->alpha = alpha;
    lora->dropout = dropout;
    return lora;
  };
  return o;
}

Override lora_experts_override(int64_t rank, double alpha) {
  TITAN_CHECK(rank >= 1, "[lora] lora.rank ", rank, " must be >= 1");
  Override o;
  o.name = "lora_experts";
  o.target_type = nn::ExpertsConfig::kType;
  o.exact = true;
  o.fqn_patterns = {"model.layers.*.moe.experts"};
  o.description = "LoRA adapters (rank " + std::to_string(rank) + ") on the experts' gate_up_proj and down_proj";
  o.factory = [rank, alpha](const nn::NodeConfig& node) -> std::shared_ptr<const nn::NodeConfig> {
    auto lora = derive<nn::LoraExpertsConfig>(dynamic_cast<const nn::ExpertsConfig&>(node));
    lora->rank = rank;
    lora->alpha = alpha;
    return lora;
  };
  return o;
}

void check_target_parameters(const std::string& target_parameters) {
  TITAN_CHECK(target_parameters.empty() || target_parameters == kExpertTargetParameters ||
                  target_parameters == "mlp.experts.down_proj,mlp.experts.gate_up_proj",
              "[lora] lora.target_parameters='", target_parameters, "' is not what titan adapts. HINT: empty, or ",
              kExpertTargetParameters, " (PEFT's names of a MoE layer's fused expert weights, both)");
}

}  // namespace titan::plugins
