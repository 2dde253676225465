// End-to-end forward+backward of the bench config — Qwen3 0.6B dims with 4 layers (hidden 1024,
// 16 heads / 8 kv, head_dim 128, FFN 3072, vocab 151,936, tied), B=1, T=2048 — ours vs Hugging
// Face Qwen3ForCausalLM on PyTorch eager (tools/bench_torch_qwen3.py), side by side in one run.
// Reports tokens/s, GFLOP/s, MFU against the measured fp32 peak, peak memory, the ratio, and
// where our time goes (per-op wall time).
//
//   build/bench/e2e_bench [--layers 4] [--batch 1] [--seq 2048] [--repeats 3] [--no-peer] [--bf16]
// --bf16 runs the model with bf16 compute (training.mixed_precision_param=bfloat16); MFU is then
// against the bf16 peak, and the peer stays PyTorch fp32 (train_bench has the bf16 peers).
#include <cstdio>
#include <cstring>
#include <string>

#include "harness.h"
#include "titan/kernels/cpu/peak.h"
#include "titan/core/allocator.h"
#include "titan/core/cpu_features.h"
#include "titan/core/parallel.h"
#include "titan/core/rng.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/models/decoder/weights.h"
#include "titan/models/builtin.h"
#include "titan/ops/registry.h"
#include "titan/models/decoder/flops.h"
#include "titan/train/peak_flops.h"

using namespace titan;

namespace {

struct Options {
  int64_t layers = 4, batch = 1, seq = 2048;
  int repeats = 3;
  bool peer = true;
  bool bf16 = false;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> int64_t {
      TITAN_CHECK(i + 1 < argc, "e2e_bench: ", a, " needs a value");
      return std::stoll(argv[++i]);
    };
    if (a == "--layers") o.layers = next();
    else if (a == "--batch") o.batch = next();
    else if (a == "--seq") o.seq = next();
    else if (a == "--repeats") o.repeats = static_cast<int>(next());
    else if (a == "--no-peer") o.peer = false;
    else if (a == "--bf16") o.bf16 = true;
    else TITAN_FAIL("e2e_bench: unknown flag ", a, " (--layers --batch --seq --repeats --no-peer --bf16)");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  nn::DecoderConfig config = models::find_size("0.6B").config;
  config.num_layers = opt.layers;
  const int64_t B = opt.batch, T = opt.seq;
  const int threads = num_threads();

  std::printf("bench config: Qwen3 0.6B dims, %ld layers, B=%ld, T=%ld, %s, %d threads\n",
              static_cast<long>(opt.layers), static_cast<long>(B), static_cast<long>(T), opt.bf16 ? "bf16 compute" : "fp32", threads);
  std::printf("cpu path %s | GEMM %s\n", cpu_path_name().c_str(), kernels::gemm_backend_name());

  // The trainer's peak of the precision used (cached when measured on a quiet machine); MFU through checked_mfu,
  // which re-measures or raises a beaten peak, so it never prints above 100%.
  const train::Precision precision = opt.bf16 ? train::Precision::bfloat16 : train::Precision::float32;
  train::PeakFlops peak = train::device_peak_flops(0.0, precision);
  std::printf("%s peak (%d threads): %.1f GFLOP/s (%s)\n", train::precision_name(precision), threads, peak.flops / 1e9, peak.source.c_str());
  auto mfu_percent = [&](double gflops) { return train::checked_mfu(gflops * 1e9, peak); };

  const int64_t rss_before_model = process_peak_rss_bytes();
  nn::Decoder model(config);
  models::init_weights(model, 0);
  model.set_compute_dtype(train::compute_dtype(precision));
  Tensor ids = Tensor::empty({B, T}, DType::i64), targets = Tensor::empty({B, T}, DType::i64);
  Rng(1).fill_int(ids.data<int64_t>(), B * T, config.vocab_size);
  // Same targets as the peer's HF loss with labels = input_ids: position t predicts ids[t + 1].
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      targets.data<int64_t>()[b * T + t] = t + 1 < T ? ids.data<int64_t>()[b * T + t + 1] : -100;
    }
  }
  host_allocator().reset_peak();
  const int64_t steady_tensors = host_allocator().stats().live_bytes;

  double loss = 0.0;
  const bench::Timing timing = bench::time_it(
      [&] {
        model.zero_grad();
        loss = model.forward_backward(ids, targets).loss;
      },
      1, opt.repeats);
  const double flops_per_token = models::train_flops_per_token(config, T);
  const double tokens = static_cast<double>(B * T);
  const double gflops = tokens * flops_per_token / timing.median_s / 1e9;
  const double peak_tensors_mib = static_cast<double>(host_allocator().stats().peak_bytes) / (1 << 20);
  const double peak_rss_mib = static_cast<double>(process_peak_rss_bytes()) / (1 << 20);

  // One more step with per-op timing on, for the breakdown.
  ops::set_op_profiling(true);
  model.zero_grad();
  const double t0 = bench::now_seconds();
  model.forward_backward(ids, targets);
  const double profiled = bench::now_seconds() - t0;
  ops::set_op_profiling(false);

  std::printf("\nours: loss %.4f | median %.3f s/step (min %.3f, max %.3f) | %.1f tokens/s | %.1f GFLOP/s | MFU %.1f%% | peak tensors %.0f MiB (params+grads %.0f MiB) | peak RSS %.0f MiB\n",
              loss, timing.median_s, timing.min_s, timing.max_s, tokens / timing.median_s, gflops,
              mfu_percent(gflops), peak_tensors_mib,
              static_cast<double>(steady_tensors) / (1 << 20), peak_rss_mib);
  (void)rss_before_model;
  std::printf("\nwhere our time goes (one profiled step, %.3f s):\n", profiled);
  double accounted = 0.0;
  for (const ops::OpProfileEntry& e : ops::op_profile()) {
    std::printf("  %-24s %8.3f s  %5.1f%%  (%ld calls)\n", e.name.c_str(), e.seconds,
                100.0 * e.seconds / profiled, static_cast<long>(e.calls));
    accounted += e.seconds;
  }
  std::printf("  %-24s %8.3f s  %5.1f%%\n", "(outside ops)", profiled - accounted,
              100.0 * (profiled - accounted) / profiled);

  if (!opt.peer) return 0;
  const std::string cmd = str("python3 ", TITAN_SOURCE_DIR, "/tools/bench_torch_qwen3.py --threads ", threads,
                              " --layers ", opt.layers, " --batch ", B, " --seq ", T, " --repeats ",
                              opt.repeats, " --profile");
  std::printf("\npeer: %s\n", cmd.c_str());
  std::fflush(stdout);
  const bench::PeerRun peer = bench::run_peer(cmd);
  std::fputs(peer.output.c_str(), stdout);
  if (!peer.ok()) {
    std::printf("peer failed (exit %d); install tools/requirements.txt to compare\n", peer.exit_code);
    return 1;
  }
  const double peer_s = peer.result["median_s"].get<double>();
  const double peer_rss = peer.result["peak_rss_mib"].get<double>();
  std::printf("\n| impl | s/step | tokens/s | GFLOP/s | MFU | peak RSS MiB |\n|---|---|---|---|---|---|\n");
  std::printf("| titan.cpp | %.3f | %.1f | %.1f | %.1f%% | %.0f |\n", timing.median_s, tokens / timing.median_s,
              gflops, mfu_percent(gflops), peak_rss_mib);
  const double peer_gflops = peer.result["gflops"].get<double>();
  std::printf("| PyTorch %s eager | %.3f | %.1f | %.1f | %.1f%% | %.0f |\n",
              peer.result["torch_version"].get<std::string>().c_str(), peer_s,
              peer.result["tokens_per_s"].get<double>(), peer_gflops,
              mfu_percent(peer_gflops), peer_rss);
  std::printf("\nspeed-up vs PyTorch: %.2fx | peak RSS ratio (ours / PyTorch): %.2f\n", peer_s / timing.median_s,
              peak_rss_mib / peer_rss);
  bench::print_result({{"impl", "titan.cpp"}, {"median_s", timing.median_s}, {"gflops", gflops},
                       {"mfu", mfu_percent(gflops) / 100.0}, {"peak_rss_mib", peak_rss_mib},
                       {"speedup_vs_pytorch", peer_s / timing.median_s}, {"rss_ratio", peak_rss_mib / peer_rss}});
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "e2e_bench: error: %s\n", e.what());
  return 1;
}
