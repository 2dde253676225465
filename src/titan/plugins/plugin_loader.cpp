#include "titan/plugins/plugin_loader.h"

#include <dlfcn.h>

#include <filesystem>
#include <map>

#include "titan/core/error.h"
#include "titan/core/log.h"
#include "titan/plugins/plugin_api.h"

namespace titan::plugins {
namespace {

class Registrar : public PluginRegistrar {
 public:
  Registrar(LoadedPlugins& out, std::string file) : out_(out), file_(std::move(file)) {}
  void add_config_function(const std::string& name, const std::string& summary, config::ConfigFn fn) override {
    config::add_config_function({name, summary, fn});
    ++out_.config_functions;
  }
  void add_override(Override o) override { out_.overrides.push_back(std::move(o)); }
  void add_module(const std::string& node_type, nn::ModuleFactory factory) override {
    nn::module_registry().add(node_type, std::move(factory), "plugin " + file_);
    ++out_.modules;
  }
  void add_kernel(const std::string& op, ops::Kernel kernel) override {
    const std::string name = std::visit([](const auto& impl) { return impl.name; }, kernel);
    ops::add_kernel(op, std::move(kernel), "plugin " + file_);
    log_info(str("[kernel] ", op, ": ", name, " (plugin ", file_, ") added; dispatch prefers it where it supports the case"));
    ++out_.kernels;
  }

 private:
  LoadedPlugins& out_;
  std::string file_;
};

std::string trimmed(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t"), b = s.find_last_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

std::vector<std::string> split_imports(const std::string& list) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = trimmed(list.substr(start, comma - start));
    if (!item.empty()) out.push_back(item);
    start = comma + 1;
  }
  return out;
}

// One library's registrations. A library is registered once per process: loading it again (the
// same file under --module and --override.imports) returns what it registered the first time.
static LoadedPlugins load_one(const std::string& file) {
  std::error_code ec;
  TITAN_CHECK(std::filesystem::is_regular_file(file, ec), "[plugin] ", file,
              " does not exist. HINT: --override.imports and --module take paths to plugin shared libraries (.so), "
              "comma-separated");
  static std::map<std::string, LoadedPlugins> loaded;
  const std::string key = std::filesystem::canonical(file).string();
  if (const auto it = loaded.find(key); it != loaded.end()) return it->second;
  // A relative name without a slash would make dlopen search the library path instead.
  const std::string path = file.find('/') == std::string::npos ? "./" + file : file;
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    TITAN_FAIL("[plugin] cannot load ", file, ": ", why ? why : "unknown dlopen error",
               ". HINT: build the plugin against this titan's headers (plugins/examples/ shows how)");
  }
  auto* version = reinterpret_cast<int (*)()>(dlsym(handle, "titan_plugin_api_version"));
  auto* reg = reinterpret_cast<void (*)(PluginRegistrar&)>(dlsym(handle, "titan_plugin_register"));
  TITAN_CHECK(version != nullptr && reg != nullptr, "[plugin] ", file, " does not export ",
              version == nullptr ? "titan_plugin_api_version" : "titan_plugin_register",
              ". HINT: a plugin defines extern \"C\" titan_plugin_api_version() and titan_plugin_register() "
              "(titan/plugins/plugin_api.h)");
  const int v = version();
  TITAN_CHECK(v == TITAN_PLUGIN_API_VERSION, "[plugin] ", file, " was built against plugin API version ", v,
              ", this titan has version ", TITAN_PLUGIN_API_VERSION, ". HINT: rebuild the plugin against this titan");
  LoadedPlugins one;
  one.files.push_back(file);
  Registrar registrar(one, file);
  reg(registrar);
  std::string names;
  for (const Override& o : one.overrides) names += (names.empty() ? "" : ", ") + o.name;
  log_info(str("[plugin] loaded ", file, ": ", one.overrides.size(), " override(s)",
               names.empty() ? std::string() : " (" + names + ")", ", ", one.modules, " module type(s), ", one.kernels,
               " kernel(s), ", one.config_functions, " config function(s)"));
  return loaded[key] = one;
}

LoadedPlugins load_plugins(const std::vector<std::string>& files) {
  LoadedPlugins out;
  for (const std::string& file : files) {
    LoadedPlugins one = load_one(file);
    out.files.push_back(file);
    for (Override& o : one.overrides) out.overrides.push_back(std::move(o));
    out.config_functions += one.config_functions;
    out.modules += one.modules;
    out.kernels += one.kernels;
  }
  return out;
}

}  // namespace titan::plugins
