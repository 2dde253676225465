// Modules and how config nodes build them. Every node of the config tree (nn/config_tree.h) is
// built by the factory registered for its (most derived) type: titan registers its own types
// (builtin_modules.cpp), a plugin registers its node types the same way (PluginRegistrar::
// add_module), and an override puts such a node into the tree. A node of a type nobody registered
// is an error, never silently the base module.
//
// A module is one of a few kinds, each an interface in its own header: EmbeddingModule,
// RmsNormModule, AttentionModule, LinearModule, RopeModule, FeedForwardModule, MoeModule (with its
// children RouterModule and ExpertsModule), HeadModule. A node
// whose type derives from a kind's config (a "RopeTiled" is a "Rope") must build a module of that
// kind. Containers (Decoder, TransformerBlock) are built by titan from their children.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "titan/core/error.h"
#include "titan/nn/config_tree.h"
#include "titan/nn/parameter.h"

namespace titan::nn {

class Module {
 public:
  virtual ~Module() = default;
  // Parameters keep the built-in FQNs (<fqn>.weight, ...) whatever the module's own layout, so
  // checkpoints and HF names do not depend on which module holds them.
  virtual void collect(ParameterList& out) = 0;
  // For the startup log and check-kernels: "rms_norm (built-in)", "rms_norm_fast (plugin x.so)".
  virtual std::string describe() const = 0;
  // Throws a one-line error when the module cannot run micro-batches of [batch, seq]; called once
  // before step 1.
  virtual void check(int64_t batch, int64_t seq) const;
};

class ModuleRegistry;

// What a factory gets besides its node: where the node is, and its children (a module with
// sub-modules, like Attention's rope and q/k norms, builds them through child<Kind>()).
class ModuleBuild {
 public:
  ModuleBuild(const ModuleRegistry& registry, const ConfigTree& tree, std::string path);
  const std::string& path() const { return path_; }  // "model.layers.3.attention"
  std::string fqn() const;                             // "layers.3.attention" (parameter prefix)
  bool has_child(const std::string& name) const;
  const NodeConfig& child_node(const std::string& name) const;
  template <class Kind>
  std::unique_ptr<Kind> child(const std::string& name) const;

 private:
  const ModuleRegistry& registry_;
  const ConfigTree& tree_;
  std::string path_;
};

using ModuleFactory = std::function<std::unique_ptr<Module>(const NodeConfig& node, const ModuleBuild& build)>;

class ModuleRegistry {
 public:
  // origin: "built-in" or the plugin's file, for messages. A type registered twice is an error.
  void add(const std::string& node_type, ModuleFactory factory, const std::string& origin);
  bool has(const std::string& node_type) const { return factories_.count(node_type) > 0; }
  // Who registered `node_type`: "built-in", "plugin <file>", or "" when nobody did.
  std::string origin(const std::string& node_type) const;
  // The module for the node at build.path(), by the node's most derived type.
  std::unique_ptr<Module> build(const NodeConfig& node, const ModuleBuild& build) const;
  // The first type of `node`'s chain that titan itself registered ("Rope" for a "RopeTiled").
  std::string builtin_type_of(const NodeConfig& node) const;
  // Builds `node` with the built-in factory of builtin_type_of(node) (check-kernels' reference).
  std::unique_ptr<Module> build_builtin(const NodeConfig& node, const ModuleBuild& build) const;

 private:
  struct Entry {
    ModuleFactory factory;
    std::string origin;
  };
  std::map<std::string, Entry> factories_;
};

// The process's registry, titan's own module types registered on first use.
ModuleRegistry& module_registry();

// `module` as a Kind, or a one-line error naming the path and both types.
template <class Kind>
std::unique_ptr<Kind> as_kind(std::unique_ptr<Module> module, const std::string& path, const NodeConfig& node) {
  auto* kind = dynamic_cast<Kind*>(module.get());
  TITAN_CHECK(kind != nullptr, "[model] ", path, ": the module built for node type ", node.type_name(),
              " is not a ", Kind::kKind, " module. HINT: a plugin's module for a ", Kind::kKind,
              "-derived node must implement nn::", Kind::kKind, "Module");
  module.release();
  return std::unique_ptr<Kind>(kind);
}

template <class Kind>
std::unique_ptr<Kind> ModuleBuild::child(const std::string& name) const {
  const ModuleBuild sub(registry_, tree_, path_ + "." + name);
  const NodeConfig& node = child_node(name);
  return as_kind<Kind>(registry_.build(node, sub), sub.path(), node);
}

// A node type's config, for a factory: the node as C (a one-line error when it is not one).
template <class C>
const C& node_as(const NodeConfig& node, const std::string& path) {
  const auto* c = dynamic_cast<const C*>(&node);
  TITAN_CHECK(c != nullptr, "[model] ", path, " is a ", node.type_name(), " node, but its module needs a ",
              C::kType, " config. HINT: an override replacing it must return a config derived from ", C::kType,
              " (derive<> builds one)");
  return *c;
}

}  // namespace titan::nn
