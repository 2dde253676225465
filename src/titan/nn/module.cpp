#include "titan/nn/module.h"

namespace titan::nn {

void Module::check(int64_t, int64_t) const {}

ModuleBuild::ModuleBuild(const ModuleRegistry& registry, const ConfigTree& tree, std::string path)
    : registry_(registry), tree_(tree), path_(std::move(path)) {}

std::string ModuleBuild::fqn() const {
  const std::string root = "model.";
  return path_.compare(0, root.size(), root) == 0 ? path_.substr(root.size()) : path_;
}

bool ModuleBuild::has_child(const std::string& name) const { return tree_.count(path_ + "." + name) > 0; }

const NodeConfig& ModuleBuild::child_node(const std::string& name) const {
  const auto it = tree_.find(path_ + "." + name);
  TITAN_CHECK(it != tree_.end(), "[model] the config tree has no node ", path_, ".", name);
  return *it->second;
}

void ModuleRegistry::add(const std::string& node_type, ModuleFactory factory, const std::string& origin) {
  const auto it = factories_.find(node_type);
  TITAN_CHECK(it == factories_.end(), "[nn] a module for node type '", node_type, "' is already registered (by ",
              it == factories_.end() ? "" : it->second.origin, "). HINT: give the plugin's node type its own name");
  factories_[node_type] = {std::move(factory), origin};
}

std::unique_ptr<Module> ModuleRegistry::build(const NodeConfig& node, const ModuleBuild& build) const {
  const auto it = factories_.find(node.type_name());
  TITAN_CHECK(it != factories_.end(), "[model] ", build.path(), ": no module is registered for node type ",
              node.type_name(), ". HINT: the plugin that defines it must register its module (PluginRegistrar::add_module)");
  std::unique_ptr<Module> module = it->second.factory(node, build);
  TITAN_CHECK(module != nullptr, "[model] ", build.path(), ": the factory for node type ", node.type_name(), " (",
              it->second.origin, ") returned no module");
  return module;
}

std::string ModuleRegistry::origin(const std::string& node_type) const {
  const auto it = factories_.find(node_type);
  return it == factories_.end() ? "" : it->second.origin;
}

std::string ModuleRegistry::builtin_type_of(const NodeConfig& node) const {
  for (const std::string& type : node.type_chain()) {
    const auto it = factories_.find(type);
    if (it != factories_.end() && it->second.origin == "built-in") return type;
  }
  return "";
}

std::unique_ptr<Module> ModuleRegistry::build_builtin(const NodeConfig& node, const ModuleBuild& build) const {
  const std::string type = builtin_type_of(node);
  TITAN_CHECK(!type.empty(), "[model] ", build.path(), ": node type ", node.type_name(),
              " derives from no built-in node type");
  return factories_.at(type).factory(node, build);
}

}  // namespace titan::nn
