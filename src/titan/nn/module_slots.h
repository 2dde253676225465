// Replaceable module slots: for each kind of node the decoder lets plugins replace (RoPE, the dense
// feed-forward), a table from node type to the factory that builds its module. The built-in
// module registers the built-in type; a plugin registers its own (plugins/plugin_api.h) and an
// override puts such a node into the config tree. A node is built by the factory of its own (most
// derived) type: a type nobody registered is an error, never silently the base module.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "titan/core/error.h"
#include "titan/nn/config_tree.h"

namespace titan::nn {

template <class Module, class Node>
class ModuleSlot {
 public:
  // fqn: the module's parameter prefix ("layers.3.feed_forward"), so that parameters keep the
  // names checkpoints use whatever module holds them.
  using Factory = std::function<std::unique_ptr<Module>(const Node& node, const std::string& fqn)>;

  ModuleSlot(std::string slot, std::string builtin_type, Factory builtin) : slot_(std::move(slot)) {
    factories_[builtin_type] = std::move(builtin);
  }

  void add(const std::string& type, Factory factory) {
    TITAN_CHECK(!factories_.count(type), "[nn] a ", slot_, " module type '", type,
                "' is already registered. HINT: give the plugin's node type its own name");
    factories_[type] = std::move(factory);
  }

  std::unique_ptr<Module> build(const std::string& path, const NodeConfig& node, const std::string& fqn) const {
    const auto* typed = dynamic_cast<const Node*>(&node);
    TITAN_CHECK(typed != nullptr, "[model] ", path, " is a ", node.type_name(), " node, but a ", slot_,
                " slot takes only nodes derived from its config type. HINT: an override replacing it must return a "
                "config derived from the slot's node type (derive<> builds one)");
    const auto it = factories_.find(node.type_name());
    TITAN_CHECK(it != factories_.end(), "[model] ", path, ": no module is registered for node type ",
                node.type_name(), ". HINT: the plugin that defines it must register its module (PluginRegistrar)");
    return it->second(*typed, fqn);
  }

 private:
  std::string slot_;
  std::map<std::string, Factory> factories_;
};

}  // namespace titan::nn
