// titan demo: forward+backward of a named spec on random weights and random tokens. The
// quickstart's first job until the training loop exists.
#include <chrono>
#include <cmath>
#include <cstdio>

#include "titan/cli/args.h"
#include "titan/cli/commands.h"
#include "titan/core/parallel.h"
#include "titan/core/rng.h"
#include "titan/models/builtin.h"
#include "titan/ops/registry.h"
#include "titan/train/memory_check.h"

namespace titan::cli {

int run_demo(int argc, char** argv) {
  const Args args("demo",
                  {{"spec", "model spec (debug, 0.6B, 1.7B, 4B, 8B, 14B, 32B)", "debug"},
                   {"layers", "override the spec's number of layers (0 = keep)", "0"},
                   {"batch", "sequences per step", "4"},
                   {"seq", "tokens per sequence", "256"},
                   {"steps", "forward+backward repetitions", "3"},
                   {"seed", "seed for weights and tokens", "0"},
                   {"threads", "CPU threads (0 = OpenMP default)", "0"},
                   {"profile", "print per-op wall time of the last step", "", true}},
                  argc, argv, 2);
  if (args.help_requested()) {
    std::fputs(args.usage().c_str(), stdout);
    return 0;
  }
  if (args.get_int("threads") > 0) set_num_threads(static_cast<int>(args.get_int("threads")));
  log_startup();

  const models::ModelSpec& spec = models::family_of_size(args.get("spec"));
  nn::DecoderConfig config = spec.find_size(args.get("spec"))->config;
  if (args.get_int("layers") > 0) config.num_layers = args.get_int("layers");
  const int64_t B = args.get_int("batch"), T = args.get_int("seq"), steps = args.get_int("steps");
  TITAN_CHECK(B > 0 && T > 0 && steps > 0, "titan demo: --batch, --seq and --steps must be > 0");
  const uint64_t seed = static_cast<uint64_t>(args.get_int("seed"));
  // Before any layer is built: --layers 1e9 would take hours to fail. The f32 weights at least.
  train::check_memory_floor(train::inference_memory_floor(config, 0, B, 0, 0), train::available_memory_per_rank(),
                            "spec " + args.get("spec"),
                            {.layers = "--layers", .vocab = "the spec's vocab_size", .batch = "--batch or --seq"});

  const std::unique_ptr<nn::Decoder> built = models::build_model(spec, config);
  nn::Decoder& model = *built;
  spec.init_weights(model, seed);
  log_info(str("model ", args.get("spec"), ": ", config.num_layers, " layers, dim ", config.dim, ", ",
               config.num_heads, "/", config.num_kv_heads, " heads, vocab ", config.vocab_size, ", ",
               static_cast<double>(config.num_params()) / 1e6, "M parameters"));

  // Random tokens; each position predicts the next one, the last predicts nothing.
  Tensor tokens = Tensor::empty({B, T + 1}, DType::i64);
  Rng(seed, 1).fill_int(tokens.data<int64_t>(), tokens.numel(), config.vocab_size);
  Tensor ids = Tensor::empty({B, T}, DType::i64), targets = Tensor::empty({B, T}, DType::i64);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      ids.data<int64_t>()[b * T + t] = tokens.data<int64_t>()[b * (T + 1) + t];
      targets.data<int64_t>()[b * T + t] = tokens.data<int64_t>()[b * (T + 1) + t + 1];
    }
  }

  const double flops_per_token = spec.flops_per_token(config, T);
  for (int64_t step = 1; step <= steps; ++step) {
    if (step == steps && args.get_bool("profile")) ops::set_op_profiling(true);
    model.zero_grad();
    host_allocator().reset_peak();
    const auto t0 = std::chrono::steady_clock::now();
    const nn::LossResult loss = model.forward_backward(ids, targets);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double sum_sq = 0.0;
    for (const nn::Parameter* p : model.parameters()) {
      const float* g = p->grad.data<float>();
      for (int64_t i = 0; i < p->grad.numel(); ++i) sum_sq += static_cast<double>(g[i]) * g[i];
    }
    const double tps = static_cast<double>(B * T) / seconds;
    std::printf("step %ld | loss %.4f | grad_norm %.4f | %.0f tokens/s | %.1f GFLOP/s | %.3f s | peak tensors %.0f MiB | peak rss %.0f MiB\n",
                static_cast<long>(step), loss.loss, std::sqrt(sum_sq), tps, tps * flops_per_token / 1e9,
                seconds, static_cast<double>(host_allocator().stats().peak_bytes) / (1 << 20),
                static_cast<double>(process_peak_rss_bytes()) / (1 << 20));
    std::fflush(stdout);
  }
  if (args.get_bool("profile")) {
    ops::set_op_profiling(false);
    for (const ops::OpProfileEntry& e : ops::op_profile()) {
      std::printf("  %-20s %8.4f s  (%ld calls)\n", e.name.c_str(), e.seconds, static_cast<long>(e.calls));
    }
  }
  return 0;
}

}  // namespace titan::cli
