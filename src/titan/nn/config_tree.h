// The model's config tree: one node per module, at its path ("model.layers.3.attention.rope"),
// holding a config whose type has a stable name ("Rope"). Overrides (plugins/override_registry.h)
// replace nodes by type and path before anything is built; the decoder then builds each
// replaceable slot from its node. A node type may derive from another (a plugin's "RopeTiled" is
// a "Rope"): type_chain() lists the type and its bases, most derived first.
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

// A node the decoder builds itself (Decoder, TransformerBlock, Attention, RmsNorm, Linear, ...):
// it is in the tree so that overrides can be matched, logged and refused against it.
class BuiltinNode : public NodeConfig {
 public:
  explicit BuiltinNode(std::string type) : type_(std::move(type)) {}
  std::vector<std::string> type_chain() const override { return {type_}; }

 private:
  std::string type_;
};

// Path -> node, ordered by path. Nodes are shared and immutable: an override replaces a node, it
// never edits one.
using ConfigTree = std::map<std::string, std::shared_ptr<const NodeConfig>>;

}  // namespace titan::nn
