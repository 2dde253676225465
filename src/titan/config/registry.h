// Named config functions (torchtitan style): a run is `titan train --config qwen3_debug`, and
// qwen3_debug() is an ordinary function that starts from base_config() and sets what differs.
// The list is explicit (registry.cpp), with no static-initializer registration that a static
// link could drop.
#pragma once

#include <string>
#include <vector>

#include "titan/config/job_config.h"

namespace titan::config {

using ConfigFn = JobConfig (*)();

struct ConfigEntry {
  std::string name;     // "qwen3_debug": the --config value
  std::string summary;  // one line for `titan train --help`
  ConfigFn fn;
};

// Every registered config function, in the order `titan train --help` lists them: the built-in
// ones, then those plugins added (--module).
const std::vector<ConfigEntry>& config_registry();

// Adds a plugin's config function; ConfigError when the name is taken.
void add_config_function(ConfigEntry entry);

// The entry named `name`; ConfigError listing the registered names otherwise.
const ConfigEntry& find_config(const std::string& name);

// The common base every config function starts from: JobConfig{} plus what all runs share.
JobConfig base_config();

}  // namespace titan::config
