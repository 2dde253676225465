#include "titan/plugins/override_registry.h"

#include <fnmatch.h>

#include <algorithm>

#include "titan/core/error.h"
#include "titan/core/log.h"

namespace titan::plugins {

bool glob_match(const std::string& pattern, const std::string& path) {
  return fnmatch(pattern.c_str(), path.c_str(), 0) == 0;
}

std::vector<std::string> matching_nodes(const Override& o, const nn::ConfigTree& tree) {
  std::vector<std::string> out;
  for (const auto& [path, node] : tree) {
    const bool type_ok = o.exact ? node->type_name() == o.target_type : node->is_a(o.target_type);
    if (!type_ok) continue;
    bool path_ok = o.fqn_patterns.empty();
    for (const std::string& pattern : o.fqn_patterns) path_ok = path_ok || glob_match(pattern, path);
    if (path_ok) out.push_back(path);
  }
  return out;
}

static std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

static bool same_or_ancestor(const std::string& a, const std::string& b) {
  return a == b || (b.size() > a.size() && b.compare(0, a.size(), a) == 0 && b[a.size()] == '.');
}

std::vector<Replacement> apply_overrides(nn::ConfigTree& tree, const std::vector<Override>& overrides) {
  std::vector<std::vector<std::string>> matches;
  for (const Override& o : overrides) {
    TITAN_CHECK(static_cast<bool>(o.factory), "[Override] ", o.name, " has no factory");
    matches.push_back(matching_nodes(o, tree));
    if (matches.back().empty()) {
      log_warn(str("[Override] ", o.name, " (target type ", o.target_type, o.exact ? ", exact" : "",
                   o.fqn_patterns.empty() ? std::string() : ", patterns " + joined(o.fqn_patterns),
                   ") matches no node of the model"));
    }
  }
  for (size_t i = 0; i < overrides.size(); ++i) {
    for (size_t j = 0; j < overrides.size(); ++j) {
      if (i == j) continue;
      for (const std::string& a : matches[i]) {
        for (const std::string& b : matches[j]) {
          if (!same_or_ancestor(a, b) || (a == b && j < i)) continue;
          TITAN_FAIL("[Override] ", overrides[i].name, " and ", overrides[j].name, " both claim ",
                     a == b ? "node " + a : "node " + b + " (" + overrides[i].name + " claims its ancestor " + a + ")",
                     ". HINT: narrow one override's fqn_patterns, or import only one of them");
        }
      }
    }
  }
  std::vector<Replacement> done;
  for (size_t i = 0; i < overrides.size(); ++i) {
    for (const std::string& path : matches[i]) {
      const std::shared_ptr<const nn::NodeConfig> old = tree.at(path);
      std::shared_ptr<const nn::NodeConfig> replacement = overrides[i].factory(*old);
      TITAN_CHECK(replacement != nullptr, "[Override] ", overrides[i].name, ": its factory returned nothing for ", path);
      done.push_back({overrides[i].name, path, old->type_name(), replacement->type_name()});
      tree[path] = std::move(replacement);
    }
  }
  std::sort(done.begin(), done.end(), [](const Replacement& a, const Replacement& b) { return a.path < b.path; });
  for (const Replacement& r : done) {
    log_info(str("[Override] ", r.override_name, ": ", r.path, " ", r.old_type, " -> ", r.new_type));
  }
  log_info(str("Applied ", done.size(), " override(s)"));
  return done;
}

}  // namespace titan::plugins
