#include "titan/nn/rope.h"

#include <map>

#include "titan/core/error.h"

namespace titan::nn {

bool NodeConfig::is_a(const std::string& type) const {
  for (const std::string& t : type_chain()) {
    if (t == type) return true;
  }
  return false;
}

void RopeModule::check(int64_t, int64_t, int64_t, int64_t) const {}

void Rope::forward(const StepContext& ctx, Tensor& x_BTHK) { ops::rope_forward(ctx.rope, x_BTHK, x_BTHK); }
void Rope::backward(const StepContext& ctx, Tensor& dx_BTHK) { ops::rope_backward(ctx.rope, dx_BTHK, dx_BTHK); }

namespace {

std::map<std::string, RopeFactory>& rope_factories() {
  static std::map<std::string, RopeFactory> factories = {
      {"Rope", [](const RopeConfig&) { return std::make_unique<Rope>(); }}};
  return factories;
}

}  // namespace

void register_rope_module(const std::string& type, RopeFactory factory) {
  TITAN_CHECK(!rope_factories().count(type), "[nn] a RoPE module type '", type,
              "' is already registered. HINT: give the plugin's node type its own name");
  rope_factories()[type] = std::move(factory);
}

std::unique_ptr<RopeModule> build_rope_module(const std::string& path, const NodeConfig& node) {
  const auto* rope = dynamic_cast<const RopeConfig*>(&node);
  TITAN_CHECK(rope != nullptr, "[model] ", path, " is a ", node.type_name(),
              " node, but a RoPE slot takes only Rope-derived nodes. HINT: an override replacing a Rope node must "
              "return a config derived from nn::RopeConfig");
  const auto it = rope_factories().find(node.type_name());
  if (it != rope_factories().end()) return it->second(*rope);
  TITAN_FAIL("[model] ", path, ": no module is registered for node type ", node.type_name(),
             ". HINT: the plugin that defines it must call register_rope_module");
}

}  // namespace titan::nn
