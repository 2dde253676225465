// titan check-kernels: everything the imported plugins bring, against titan's own, in fp32 on
// random inputs, forward and backward, at a few shapes (those a module's check() refuses are
// listed as skipped):
//   - every module an override would put into a model: the plugin's module against the built-in
//     module of the node's base type, run with the reference kernels (TITAN_USE_REF semantics);
//   - every kernel a plugin added to an op: a built-in module that runs the op (or the op itself,
//     for the optimizer and element-wise ops), with dispatch preferring the plugin's kernel,
//     against the same module on the reference kernels.
// Generic over node kinds (nn/module_probe.h drives any module). Prints max abs and max rel
// error per tensor (rel = max abs / max |reference|) and exits 1 when any element is off by more
// than atol + rtol |reference|.
#include <cmath>
#include <cstdio>
#include <map>

#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/core/rng.h"
#include "titan/nn/module_probe.h"
#include "titan/ops/builtin.h"
#include "titan/plugins/plugin_loader.h"

namespace titan::cli {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;

// Prints one tensor's errors; returns whether it is within tolerance.
bool report(const std::string& what, const Tensor& got, const Tensor& want) {
  double max_abs = 0.0, max_ref = 0.0;
  bool ok = got.shape() == want.shape();
  for (int64_t i = 0; ok && i < want.numel(); ++i) {
    const double g = got.data<float>()[i], w = want.data<float>()[i];
    const double err = std::fabs(g - w);
    max_abs = std::max(max_abs, err);
    max_ref = std::max(max_ref, std::fabs(w));
    ok = ok && std::isfinite(g) && err <= kAtol + kRtol * std::fabs(w);
  }
  std::printf("    %-34s %-18s max abs %.3e  max rel %.3e  %s\n", what.c_str(), shape_str(want.shape()).c_str(), max_abs,
              max_ref > 0 ? max_abs / max_ref : 0.0, ok ? "ok" : "FAIL");
  return ok;
}

// The small model whose nodes overrides are applied to: every node kind present (layer 1 sparse),
// no biases.
nn::DecoderConfig probe_model() {
  nn::DecoderConfig c;
  c.vocab_size = 64;
  c.dim = 64;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.hidden_dim = 96;
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_hidden_dim = 32;
  c.decoder_sparse_step = 2;
  return c;
}

// The micro-batch shapes tried: a short sequence, an odd token count, and a long one (at most 256
// tokens: the fp32 tolerance holds for parameter gradients summed over that many rows).
const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 64}, {1, 37}, {1, 256}};

// `mine` against `reference` (both probed at each shape); `reference_on_ref`: run the reference
// with the reference kernels. Parameters get the same random values by FQN first.
bool compare(nn::Module& mine, nn::Module& reference, const nn::ConfigTree& tree, const std::string& path) {
  nn::ParameterList a, b;
  mine.collect(a);
  reference.collect(b);
  if (a.size() != b.size()) {
    std::printf("    FAIL: %zu parameters, the built-in module has %zu\n", a.size(), b.size());
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i]->fqn != b[i]->fqn || a[i]->value.shape() != b[i]->value.shape()) {
      std::printf("    FAIL: parameter %zu is %s %s, the built-in module's %s %s\n", i, a[i]->fqn.c_str(),
                  shape_str(a[i]->value.shape()).c_str(), b[i]->fqn.c_str(), shape_str(b[i]->value.shape()).c_str());
      return false;
    }
  }
  nn::probe_parameters(reference, 10);
  for (size_t i = 0; i < a.size(); ++i) a[i]->value.copy_from(b[i]->value);
  bool ok = true;
  int ran = 0;
  for (const auto& [batch, seq] : kShapes) {
    nn::NamedTensors got;
    try {
      got = nn::probe_module(mine, tree, path, batch, seq);
    } catch (const Error& e) {
      std::printf("    skipped [%ld x %ld]: %s\n", static_cast<long>(batch), static_cast<long>(seq), e.what());
      continue;
    }
    ++ran;
    ops::set_use_ref(true);
    const nn::NamedTensors want = nn::probe_module(reference, tree, path, batch, seq);
    ops::set_use_ref(false);
    for (size_t i = 0; i < want.size(); ++i) ok &= report(want[i].first, got[i].second, want[i].second);
  }
  if (ran == 0) std::printf("    FAIL: the module accepted none of the shapes tried\n");
  return ok && ran > 0;
}

// A plugin module: the node an override puts at `path`, against the built-in module of its base type.
bool check_module(const plugins::Override& o, const nn::ConfigTree& base, const std::string& path) {
  nn::ConfigTree tree = base;
  tree[path] = o.factory(*base.at(path));
  const nn::NodeConfig& node = *tree.at(path);
  const nn::ModuleRegistry& registry = nn::module_registry();
  const std::unique_ptr<nn::Module> mine = registry.build(node, nn::ModuleBuild(registry, tree, path));
  const std::unique_ptr<nn::Module> reference = registry.build_builtin(node, nn::ModuleBuild(registry, base, path));
  std::printf("module %s: %s at %s (%s -> %s) against %s on reference kernels, fp32, atol %.0e + rtol %.0e\n",
              o.name.c_str(), mine->describe().c_str(), path.c_str(), base.at(path)->type_name().c_str(),
              node.type_name().c_str(), reference->describe().c_str(), kAtol, kRtol);
  return compare(*mine, *reference, tree, path);
}

// The node whose built-in module runs `op` in the probe model ("" for ops no module runs).
std::string node_running(const std::string& op) {
  static const std::map<std::string, std::string> nodes = {
      {"embedding", "model.tok_embeddings"},           {"rms_norm", "model.norm"},
      {"linear", "model.layers.0.feed_forward"},       {"swiglu", "model.layers.0.feed_forward"},
      {"rope", "model.layers.0.attention.rope"},       {"attention", "model.layers.0.attention"},
      {"lm_head_xent", "model.output"},                {"moe_router", "model.layers.1.moe.router"},
      {"moe_dispatch", "model.layers.1.moe"},          {"moe_experts", "model.layers.1.moe.experts"},
      {"moe_combine", "model.layers.1.moe"}};
  const auto it = nodes.find(op);
  return it == nodes.end() ? "" : it->second;
}

// The optimizer and element-wise ops, called directly: dispatch (the plugin's kernel) against the reference.
bool check_op_directly(const std::string& op) {
  const int64_t n = 1031;  // not a multiple of any vector width
  auto random = [n](uint64_t seed) {
    Tensor t = Tensor::empty({n});
    Rng(seed).fill_normal(t.data<float>(), n, 0.0f, 1.0f);
    return t;
  };
  auto run = [&](bool ref) -> std::vector<std::pair<std::string, Tensor>> {
    ops::set_use_ref(ref);
    Tensor a = random(1), b = random(2);
    std::vector<std::pair<std::string, Tensor>> out;
    if (op == "accumulate") {
      ops::accumulate(a, b);
      out.emplace_back("a += b", a);
    } else if (op == "scale") {
      ops::scale(a, 0.37f);
      out.emplace_back("a *= s", a);
    } else if (op == "sum_squares") {
      Tensor s = Tensor::empty({1});
      s.data<float>()[0] = static_cast<float>(ops::sum_squares(a));
      out.emplace_back("sum of squares", s);
    } else if (op == "adamw") {
      Tensor m = random(3), v = random(4);
      for (int64_t i = 0; i < n; ++i) v.data<float>()[i] = std::fabs(v.data<float>()[i]);
      ops::adamw_step(a, b, m, v, {1e-3, 0.9, 0.95, 1e-8, 0.1, 3});
      out.emplace_back("param", a);
      out.emplace_back("exp_avg", m);
      out.emplace_back("exp_avg_sq", v);
    }
    ops::set_use_ref(false);
    return out;
  };
  const auto got = run(false), want = run(true);
  if (want.empty()) {
    std::printf("    FAIL: titan has no probe for op %s\n", op.c_str());
    return false;
  }
  bool ok = true;
  for (size_t i = 0; i < want.size(); ++i) ok &= report(want[i].first, got[i].second, want[i].second);
  return ok;
}

bool check_kernel(const ops::AddedKernel& k, const nn::ConfigTree& base) {
  const std::string path = node_running(k.op);
  std::printf("kernel %s (op %s, %s) %s against the reference kernels, fp32, atol %.0e + rtol %.0e\n", k.name.c_str(),
              k.op.c_str(), k.origin.c_str(), path.empty() ? "called directly" : ("in the built-in module at " + path).c_str(),
              kAtol, kRtol);
  if (path.empty()) return check_op_directly(k.op);
  const nn::ModuleRegistry& registry = nn::module_registry();
  const nn::ModuleBuild build(registry, base, path);
  const std::unique_ptr<nn::Module> mine = registry.build_builtin(*base.at(path), build);
  const std::unique_ptr<nn::Module> reference = registry.build_builtin(*base.at(path), build);
  return compare(*mine, *reference, base, path);
}

}  // namespace

int run_check_kernels(int argc, char** argv) {
  const Args args("check-kernels",
                  {{"override.imports", "plugin shared libraries, comma-separated (as for titan train)", ""},
                   {"only", "check only modules of this node type (Rope, RmsNorm, ...) or kernels of this op (rope, ...)",
                    ""}},
                  argc, argv, 2);
  if (args.help_requested()) {
    std::fputs(args.usage().c_str(), stdout);
    return 0;
  }
  const std::string only = args.get("only");
  log_startup();
  const plugins::LoadedPlugins loaded = plugins::load_plugins(plugins::split_imports(args.get("override.imports")));
  const nn::ConfigTree base = nn::decoder_config_tree(probe_model());
  int checked = 0, failed = 0;
  for (const plugins::Override& o : loaded.overrides) {
    const std::vector<std::string> paths = plugins::matching_nodes(o, base);
    if (paths.empty() || (!only.empty() && !base.at(paths.front())->is_a(only))) continue;
    const bool ok = check_module(o, base, paths.front());
    ++checked;
    failed += !ok;
  }
  for (const ops::AddedKernel& k : ops::added_kernels()) {
    if (!only.empty() && only != k.op) continue;
    const bool ok = check_kernel(k, base);
    ++checked;
    failed += !ok;
  }
  if (checked == 0) {
    std::printf("no plugin modules or kernels to check%s. HINT: --override.imports PLUGIN.so\n",
                only.empty() ? "" : (" for " + only).c_str());
    return 0;
  }
  std::printf("%d module(s) and kernel(s) checked, %d failed\n", checked, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace titan::cli
