// titan's own module types, one line each: the explicit list (no static-initializer registration
// that a static link could drop). A factory builds its node's module; node_as<> names the node
// when an override put a config of the wrong kind there.
#include "titan/nn/attention.h"
#include "titan/nn/embedding.h"
#include "titan/nn/feed_forward.h"
#include "titan/nn/gated_delta_net.h"
#include "titan/nn/head.h"
#include "titan/nn/linear.h"
#include "titan/nn/lora.h"
#include "titan/nn/moe.h"
#include "titan/nn/rms_norm.h"
#include "titan/nn/rope.h"

namespace titan::nn {

static void register_builtin_modules(ModuleRegistry& r) {
  const std::string builtin = "built-in";
  r.add(EmbeddingConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<Embedding>(node_as<EmbeddingConfig>(n, b.path()), b.fqn());
  }, builtin);
  r.add(RmsNormConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<RmsNorm>(node_as<RmsNormConfig>(n, b.path()), b.fqn());
  }, builtin);
  r.add(AttentionConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<Attention>(node_as<AttentionConfig>(n, b.path()), b);
  }, builtin);
  r.add(GatedDeltaNetConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<GatedDeltaNet>(node_as<GatedDeltaNetConfig>(n, b.path()), b);
  }, builtin);
  r.add(RopeConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    (void)node_as<RopeConfig>(n, b.path());  // the tables are the step's (theta and head_dim are the model's)
    return std::make_unique<Rope>();
  }, builtin);
  r.add(FeedForwardConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<FeedForward>(node_as<FeedForwardConfig>(n, b.path()), b);
  }, builtin);
  r.add(LinearConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<Linear>(node_as<LinearConfig>(n, b.path()), b.fqn());
  }, builtin);
  r.add(LoraLinearConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<LoraLinear>(node_as<LoraLinearConfig>(n, b.path()), b.fqn());
  }, builtin);
  r.add(MoeConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<Moe>(node_as<MoeConfig>(n, b.path()), b);
  }, builtin);
  r.add(RouterConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<Router>(node_as<RouterConfig>(n, b.path()), b.fqn());
  }, builtin);
  r.add(ExpertsConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<Experts>(node_as<ExpertsConfig>(n, b.path()), b.fqn());
  }, builtin);
  r.add(LoraExpertsConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<LoraExperts>(node_as<LoraExpertsConfig>(n, b.path()), b.fqn());
  }, builtin);
  r.add(HeadConfig::kType, [](const NodeConfig& n, const ModuleBuild& b) -> std::unique_ptr<Module> {
    return std::make_unique<Head>(node_as<HeadConfig>(n, b.path()), b.fqn());
  }, builtin);
}

ModuleRegistry& module_registry() {
  static ModuleRegistry* registry = [] {
    auto* r = new ModuleRegistry();
    register_builtin_modules(*r);
    return r;
  }();
  return *registry;
}

}  // namespace titan::nn
