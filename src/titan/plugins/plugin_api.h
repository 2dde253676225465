// The plugin API: what a shared library loaded with --override.imports sees. A plugin is built
// against this header (and the titan headers it includes) with the same compiler as titan, and
// exports two C functions:
//
//   extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }
//   extern "C" void titan_plugin_register(titan::plugins::PluginRegistrar& registrar) { ... }
//
// titan refuses a plugin whose version differs from its own, or that lacks either symbol. In
// titan_plugin_register the plugin adds what it brings: module types for config nodes (their
// forward, backward and shape constraints, checked before step 1), overrides that put those
// nodes into the model's config tree, and config functions. `--override.imports` loads plugins
// and applies their overrides; `--module` loads them for their config functions only. See plugins/examples/ and the README's "Writing a
// kernel plugin".
#pragma once

#include <string>

#include "titan/config/registry.h"
#include "titan/nn/feed_forward.h"
#include "titan/nn/rope.h"
#include "titan/plugins/override_registry.h"

// Bumped whenever anything a plugin sees changes incompatibly (these headers, the registrar).
#define TITAN_PLUGIN_API_VERSION 2

namespace titan::plugins {

class PluginRegistrar {
 public:
  virtual ~PluginRegistrar() = default;
  // A config function: `titan train --module THIS.so --config NAME` runs it.
  virtual void add_config_function(const std::string& name, const std::string& summary, config::ConfigFn fn) = 0;
  // An override; it applies to every run that imports this plugin (--override.imports).
  virtual void add_override(Override o) = 0;
  // A module type for RoPE nodes (model.layers.<i>.attention.rope): nodes whose type is
  // `node_type` (a RopeConfig-derived config the plugin defines) are built by `factory`.
  virtual void add_rope_module(const std::string& node_type,
                               nn::ModuleSlot<nn::RopeModule, nn::RopeConfig>::Factory factory) = 0;
  // The same for dense feed-forward nodes (model.layers.<i>.feed_forward, FeedForwardNode-derived).
  virtual void add_feed_forward_module(const std::string& node_type,
                                       nn::ModuleSlot<nn::FeedForwardModule, nn::FeedForwardNode>::Factory factory) = 0;
};

}  // namespace titan::plugins

extern "C" {
int titan_plugin_api_version();
void titan_plugin_register(titan::plugins::PluginRegistrar& registrar);
}
