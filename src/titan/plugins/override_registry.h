// The override registry: replace nodes of the model's config tree (nn/config_tree.h) by type and
// path, before anything is built (torchtitan's override registry, in C++).
//
// An Override names a target node type and, optionally, shell-style glob patterns over the full
// path (fnmatch without FNM_PATHNAME: `*` crosses dots, `?`, character classes:
// "model.layers.1[0-9].attention.rope" selects layers 10-19). `exact` matches that type only;
// otherwise derived types match too. Its factory maps a matched node to its replacement (derive<>
// below copies the fields the two share).
//
// apply_overrides collects every override's matches on the original tree (so their order does not
// matter), refuses two overrides claiming the same node or one claiming an ancestor of another's
// node (naming both and the node), warns for an override that matches nothing, replaces the nodes
// and logs each replacement: "[Override] <name>: <path> <OldType> -> <NewType>", then "Applied N
// override(s)". Checkpoint names are untouched: parameters keep their FQNs whatever module holds them.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "titan/nn/config_tree.h"

namespace titan::plugins {

using NodeFactory = std::function<std::shared_ptr<const nn::NodeConfig>(const nn::NodeConfig&)>;

struct Override {
  std::string name;                       // "rope_tiled"
  std::string target_type;                // "Rope"
  bool exact = false;                     // true: nodes of exactly target_type, not derived types
  std::vector<std::string> fqn_patterns;  // empty: every node of the type
  std::string description;
  NodeFactory factory;
};

struct Replacement {
  std::string override_name, path, old_type, new_type;
};

// Whether `path` matches the shell-style glob `pattern` (`*` crossing dots).
bool glob_match(const std::string& pattern, const std::string& path);
// The paths of `tree` that `o` selects, in path order.
std::vector<std::string> matching_nodes(const Override& o, const nn::ConfigTree& tree);
// Applies `overrides` to `tree` (see the top of this file); returns what was replaced, in path order.
std::vector<Replacement> apply_overrides(nn::ConfigTree& tree, const std::vector<Override>& overrides);

// The replacement config of type To for a node of type From (To derived from From): a default To
// with every field From declares copied from `from`.
template <class To, class From>
std::shared_ptr<To> derive(const From& from) {
  static_assert(std::is_base_of_v<From, To>, "derive<To>(from): To must derive from From");
  auto to = std::make_shared<To>();
  static_cast<From&>(*to) = from;
  return to;
}

}  // namespace titan::plugins
