#include "titan/config/registry.h"

#include "titan/core/abbreviate.h"

namespace titan::config {

JobConfig base_config() {
  // Nothing beyond the struct defaults is shared yet; settings every run wants go here, so that
  // each config function only states how it differs.
  return JobConfig{};
}

static std::vector<ConfigEntry>& entries() {
  // Filled by the model families (models::register_config_functions), then by plugins (--module).
  static std::vector<ConfigEntry> entries;
  return entries;
}

const std::vector<ConfigEntry>& config_registry() { return entries(); }

void add_config_function(ConfigEntry entry) {
  for (const ConfigEntry& e : entries()) {
    if (e.name == entry.name) {
      config_fail("--module: config function '", entry.name, "' is already registered; a plugin must name its own");
    }
  }
  entries().push_back(std::move(entry));
}

const ConfigEntry& find_config(const std::string& name) {
  std::string known;
  for (const ConfigEntry& entry : config_registry()) {
    if (entry.name == name) return entry;
    known += (known.empty() ? "" : ", ") + entry.name;
  }
  config_fail("--config: unknown config function '", abbreviate(name), "'; use one of ", known);
}

}  // namespace titan::config
