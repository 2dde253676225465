// The plugin API: what a shared library loaded with --override.imports (or --module) sees. A
// plugin is built against this header (and the titan headers it includes) with the same compiler
// as titan, and exports two C functions:
//
//   extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }
//   extern "C" void titan_plugin_register(titan::plugins::PluginRegistrar& registrar) { ... }
//
// titan refuses a plugin whose version differs from its own, or that lacks either symbol. In
// titan_plugin_register the plugin adds what it brings:
//   - module types for config nodes (any node kind: Embedding, RmsNorm, Attention, Linear, Rope,
//     FeedForward, Moe, Router, Experts, Head; nn/module.h): its own node type, derived from titan's config of
//     that kind, and the module that node builds (forward, backward, shape constraints);
//   - overrides that put those nodes into the model's config tree (by type and FQN glob);
//   - op kernels (ops/builtin.h): another implementation of an op, preferred by dispatch;
//   - config functions.
// `titan check-kernels --override.imports X.so` checks every module and kernel a plugin brings
// against titan's own, forward and backward. See plugins/examples/ and the README's "Writing a
// kernel plugin".
#pragma once

#include <string>

#include "titan/config/registry.h"
#include "titan/nn/attention.h"
#include "titan/nn/embedding.h"
#include "titan/nn/feed_forward.h"
#include "titan/nn/head.h"
#include "titan/nn/linear.h"
#include "titan/nn/moe.h"
#include "titan/nn/rms_norm.h"
#include "titan/nn/rope.h"
#include "titan/ops/builtin.h"
#include "titan/plugins/override_registry.h"

// Bumped whenever anything a plugin sees changes incompatibly (these headers, the registrar).
// 3: nn::Parameter carries a compute dtype (training.mixed_precision_param); a module reads its
// weights through Parameter::for_compute() to follow it, and the linear, lm_head_xent and
// embedding ops may receive bf16 operands (a kernel's `supports` must check dtypes).
// 4: attention's and the feed-forward's projections are Linear nodes (nn/linear.h: LinearModule),
// built as children through ModuleBuild; a Parameter may be frozen (no gradient: a LoRA base).
// 5: AttentionModule has a virtual forward_cached (generation with a KV cache; the default
// throws), and ops::Kernel a kv_attention alternative (KvAttentionImpl).
// 6: ops::Kernel has the alternatives of the ops that replaced host loops over tensor data in nn/,
// parallel/ and train/ (issue 28): positions, rows_gather, rows_strided, rows_mask, local_ids,
// kv_cache_append, moe_load, moe_bias_update, multi_sum_squares, first_nonfinite and the three
// vocab_parallel_xent ops.
// 7: attention takes offsets, a key range and a value width (AttentionArgs: mask, q_offset,
// kv_offset), its backward a dlse after dout; ops::Kernel has an attention_merge alternative; the
// StepContext carries a SequenceAttention that nn::Attention defers to.
#define TITAN_PLUGIN_API_VERSION 7

namespace titan::plugins {

class PluginRegistrar {
 public:
  virtual ~PluginRegistrar() = default;
  // A config function: `titan train --module THIS.so --config NAME` runs it.
  virtual void add_config_function(const std::string& name, const std::string& summary, config::ConfigFn fn) = 0;
  // An override; it applies to every run that imports this plugin (--override.imports).
  virtual void add_override(Override o) = 0;
  // The module type that builds nodes of type `node_type` (a config the plugin defines, derived
  // from one of titan's node configs, e.g. nn::RmsNormConfig). The factory returns a module of
  // that node's kind (an nn::RmsNormModule for an RmsNorm-derived node).
  virtual void add_module(const std::string& node_type, nn::ModuleFactory factory) = 0;
  // A kernel for op `op` ("rms_norm", "rope", "linear", ...): added after titan's own, so
  // dispatch prefers it on its device wherever its `supports` accepts the case.
  virtual void add_kernel(const std::string& op, ops::Kernel kernel) = 0;
};

}  // namespace titan::plugins

extern "C" {
int titan_plugin_api_version();
void titan_plugin_register(titan::plugins::PluginRegistrar& registrar);
}
