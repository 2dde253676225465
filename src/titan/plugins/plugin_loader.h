// Loading plugins (plugin_api.h): dlopen each file, check its API version, let it register.
// Every failure is a one-line error naming the file and the fix. Loaded libraries stay loaded for
// the life of the process (their code backs modules and overrides).
#pragma once

#include <string>
#include <vector>

#include "titan/plugins/override_registry.h"

namespace titan::plugins {

struct LoadedPlugins {
  std::vector<std::string> files;        // in load order
  std::vector<Override> overrides;       // every override the plugins registered
  int config_functions = 0;              // config functions they added to config::config_registry()
  int modules = 0;                       // module types they added to nn::module_registry()
  int kernels = 0;                       // op kernels they added (ops::add_kernel)
};

// "a.so,b.so" (spaces around commas ignored) -> the files; empty -> none.
std::vector<std::string> split_imports(const std::string& list);
// Loads the files in order (each library once per process); logs "[plugin] loaded <file>: N
// override(s) (names), K module type(s), J kernel(s), M config function(s)".
LoadedPlugins load_plugins(const std::vector<std::string>& files);

}  // namespace titan::plugins
