// titan check-kernels: every plugin module that an imported override would put into a model is
// run against the built-in module computed by the reference kernels (TITAN_USE_REF semantics), in
// fp32 on random inputs, forward and backward, at a few shapes (those its check() refuses are
// listed as skipped). Prints max abs and max rel error per tensor (rel = max abs / max |reference|)
// and exits 1 when any element is off by more than atol + rtol |reference|.
#include <cmath>
#include <cstdio>

#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/core/rng.h"
#include "titan/nn/decoder.h"
#include "titan/ops/registry.h"
#include "titan/plugins/plugin_loader.h"

namespace titan::cli {
namespace {

constexpr double kAtol = 1e-5, kRtol = 1e-4;

Tensor random(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  Rng(seed).fill_normal(t.data<float>(), t.numel(), 0.0f, 1.0f);
  return t;
}

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
  std::printf("    %-28s %-18s max abs %.3e  max rel %.3e  %s\n", what.c_str(), shape_str(want.shape()).c_str(), max_abs,
              max_ref > 0 ? max_abs / max_ref : 0.0, ok ? "ok" : "FAIL");
  return ok;
}

// The small model whose nodes the overrides are applied to (every slot present, no biases).
nn::DecoderConfig probe_model() {
  nn::DecoderConfig c;
  c.vocab_size = 64;
  c.dim = 64;
  c.num_layers = 1;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.hidden_dim = 96;
  return c;
}

nn::StepContext context(int64_t batch, int64_t seq, const nn::RopeConfig& rope) {
  nn::StepContext ctx;
  ctx.batch = batch;
  ctx.seq = seq;
  ctx.positions_N = Tensor::empty({batch * seq}, DType::i64);
  for (int64_t i = 0; i < batch * seq; ++i) ctx.positions_N.data<int64_t>()[i] = i % seq;
  ctx.rope = ops::rope_tables({rope.theta}, ctx.positions_N, rope.head_dim);
  return ctx;
}

bool check_rope(const std::string& path, const nn::NodeConfig& node, const nn::RopeConfig& base) {
  const std::unique_ptr<nn::RopeModule> module = nn::rope_slot().build(path, node, "check");
  nn::Rope reference;
  bool ok = true;
  int ran = 0;
  for (const int64_t seq : {64, 256, 512}) {
    for (const int64_t heads : {4, 2}) {
      const int64_t batch = 2, k = base.head_dim;
      const Shape shape = {batch, seq, heads, k};
      try {
        module->check(batch, seq, heads, k);
      } catch (const Error& e) {
        std::printf("    skipped %s: %s\n", shape_str(shape).c_str(), e.what());
        continue;
      }
      ++ran;
      const nn::StepContext ctx = context(batch, seq, base);
      const Tensor x = random(shape, 1), dy = random(shape, 2);
      Tensor y = x.clone(), dx = dy.clone(), y_ref = x.clone(), dx_ref = dy.clone();
      module->forward(ctx, y);
      module->backward(ctx, dx);
      ops::set_use_ref(true);
      reference.forward(ctx, y_ref);
      reference.backward(ctx, dx_ref);
      ops::set_use_ref(false);
      ok &= report("forward y", y, y_ref);
      ok &= report("backward dx", dx, dx_ref);
    }
  }
  if (ran == 0) std::printf("    FAIL: the module accepted none of the shapes tried\n");
  return ok && ran > 0;
}

bool check_feed_forward(const std::string& path, const nn::NodeConfig& node, const nn::FeedForwardNode& base) {
  const std::unique_ptr<nn::FeedForwardModule> module = nn::feed_forward_slot().build(path, node, "check.feed_forward");
  nn::FeedForward reference(base.config, "check.feed_forward");
  nn::ParameterList mine, theirs;
  module->collect(mine);
  reference.collect(theirs);
  if (mine.size() != theirs.size()) {
    std::printf("    FAIL: %zu parameters, the built-in module has %zu\n", mine.size(), theirs.size());
    return false;
  }
  for (size_t i = 0; i < mine.size(); ++i) {
    if (mine[i]->fqn != theirs[i]->fqn || mine[i]->value.shape() != theirs[i]->value.shape()) {
      std::printf("    FAIL: parameter %zu is %s %s, the built-in module's %s %s\n", i, mine[i]->fqn.c_str(),
                  shape_str(mine[i]->value.shape()).c_str(), theirs[i]->fqn.c_str(),
                  shape_str(theirs[i]->value.shape()).c_str());
      return false;
    }
    // N(0, 1/fan_in) weights keep activations O(1), so the tolerance means the same for every tensor.
    Tensor w = random(theirs[i]->value.shape(), 10 + i);
    const float scale = 1.0f / std::sqrt(static_cast<float>(w.size(w.ndim() - 1)));
    for (int64_t j = 0; j < w.numel(); ++j) w.data<float>()[j] *= scale;
    theirs[i]->value.copy_from(w);
    mine[i]->value.copy_from(w);
  }
  bool ok = true;
  int ran = 0;
  for (const int64_t rows : {1, 37, 256}) {
    try {
      module->check(1, rows);
    } catch (const Error& e) {
      std::printf("    skipped %ld rows: %s\n", static_cast<long>(rows), e.what());
      continue;
    }
    ++ran;
    const Tensor x = random({rows, base.config.dim}, 3), dy = random({rows, base.config.dim}, 4);
    for (nn::Parameter* p : mine) p->grad.zero_();
    for (nn::Parameter* p : theirs) p->grad.zero_();
    std::any saved, saved_ref;
    const Tensor y = module->forward(x, saved);
    const Tensor dx = module->backward(dy, saved);
    ops::set_use_ref(true);
    const Tensor y_ref = reference.forward(x, saved_ref);
    const Tensor dx_ref = reference.backward(dy, saved_ref);
    ops::set_use_ref(false);
    ok &= report("forward y", y, y_ref);
    ok &= report("backward dx", dx, dx_ref);
    for (size_t i = 0; i < mine.size(); ++i) {
      const std::string name = mine[i]->fqn.substr(std::string("check.feed_forward.").size());
      ok &= report("backward d" + name, mine[i]->grad, theirs[i]->grad);
    }
  }
  if (ran == 0) std::printf("    FAIL: the module accepted none of the shapes tried\n");
  return ok && ran > 0;
}

}  // namespace

int run_check_kernels(int argc, char** argv) {
  const Args args("check-kernels",
                  {{"override.imports", "plugin shared libraries, comma-separated (as for titan train)", ""},
                   {"op", "check only this op: rope or feed_forward", ""}},
                  argc, argv, 2);
  if (args.help_requested()) {
    std::fputs(args.usage().c_str(), stdout);
    return 0;
  }
  const std::string op = args.get("op");
  if (!op.empty() && op != "rope" && op != "feed_forward") {
    throw UsageError(str("titan check-kernels: --op '", op, "' is not an op plugins can replace; use rope or feed_forward"));
  }
  log_startup();
  const plugins::LoadedPlugins loaded = plugins::load_plugins(plugins::split_imports(args.get("override.imports")));
  const nn::ConfigTree tree = nn::decoder_config_tree(probe_model());
  int checked = 0, failed = 0;
  for (const plugins::Override& o : loaded.overrides) {
    const std::vector<std::string> paths = plugins::matching_nodes(o, tree);
    if (paths.empty()) continue;
    const nn::NodeConfig& base = *tree.at(paths.front());
    const std::shared_ptr<const nn::NodeConfig> node = o.factory(base);
    const auto* rope = dynamic_cast<const nn::RopeConfig*>(&base);
    const auto* ff = dynamic_cast<const nn::FeedForwardNode*>(&base);
    const char* kind = rope ? "rope" : ff ? "feed_forward" : nullptr;
    if (kind == nullptr || (!op.empty() && op != kind)) continue;
    std::printf("%s: %s -> %s (op %s) against the built-in reference, fp32, atol %.0e + rtol %.0e\n", o.name.c_str(),
                base.type_name().c_str(), node->type_name().c_str(), kind, kAtol, kRtol);
    const bool ok = rope ? check_rope(paths.front(), *node, *rope) : check_feed_forward(paths.front(), *node, *ff);
    ++checked;
    failed += !ok;
  }
  if (checked == 0) {
    std::printf("no plugin kernels to check%s. HINT: --override.imports PLUGIN.so\n",
                op.empty() ? "" : (" for op " + op).c_str());
    return 0;
  }
  std::printf("%d kernel(s) checked, %d failed\n", checked, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace titan::cli
