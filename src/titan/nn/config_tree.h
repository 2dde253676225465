// The model's config tree: one node per module, at its path ("model.layers.3.attention.rope"). The
// nodes *are* the modules' configs (RmsNormConfig, AttentionConfig, RopeConfig, ...), each with a
// stable type name ("RmsNorm"). Overrides (plugins/override_registry.h) replace nodes by type and
// path before anything is built; the decoder is then built by walking the tree, each node by the
// module type registered for it (nn/module.h). A node type may derive from another (a plugin's
// "RopeTiled" is a "Rope"): type_chain() lists the type and its bases, most derived first.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace titan::nn {

class NodeConfig {
 public:
  virtual ~NodeConfig() = default;
  // This type and the types it derives from, most derived first: {"RopeTiled", "Rope"}.
  virtual std::vector<std::string> type_chain() const = 0;
  std::string type_name() const { return type_chain().front(); }
  bool is_a(const std::string& type) const;
};

// Path -> node, ordered by path. Nodes are shared and immutable: an override replaces a node, it
// never edits one.
using ConfigTree = std::map<std::string, std::shared_ptr<const NodeConfig>>;

}  // namespace titan::nn
