// Full training steps of the bench config — Qwen3-0.6B shapes with model.n_layers=4, B=1, T=2048,
// fp32: data (PrefetchLoader over tinyshakespeare with the real Qwen3 tokenizer) + forward +
// backward + clip + AdamW, through the same run_training() that `titan train` runs — against
// Hugging Face Qwen3ForCausalLM + torch.nn.utils.clip_grad_norm_ + torch.optim.AdamW on PyTorch
// eager (tools/bench_torch_qwen3.py --train-step), side by side in one run.
//
//   build/bench/train_bench [--layers 4] [--seq 2048] [--steps 4] [--no-peer]
// Median over steps 2..N (step 1 includes warm-up). Needs ../shared beside the checkout for the
// tokenizer and text (a benchmark, not the product).
#include <cstdio>
#include <filesystem>
#include <string>

#include "harness.h"
#include "titan/config/registry.h"
#include "titan/core/allocator.h"
#include "titan/core/cpu_features.h"
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/peak.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/flops.h"
#include "titan/train/trainer.h"

using namespace titan;

int main(int argc, char** argv) try {
  int64_t layers = 4, seq = 2048, steps = 4;
  bool peer_enabled = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> int64_t {
      TITAN_CHECK(i + 1 < argc, "train_bench: ", a, " needs a value");
      return std::stoll(argv[++i]);
    };
    if (a == "--layers") layers = next();
    else if (a == "--seq") seq = next();
    else if (a == "--steps") steps = next();
    else if (a == "--no-peer") peer_enabled = false;
    else TITAN_FAIL("train_bench: unknown flag ", a, " (--layers --seq --steps --no-peer)");
  }
  TITAN_CHECK(steps >= 2, "train_bench: --steps must be >= 2 (step 1 is warm-up)");
  const int threads = num_threads();
  const kernels::PeakKernel peak_kernel = kernels::best_fp32_kernel();
  const double peak_gflops = kernels::measure_peak(peak_kernel, threads).max_gflops;
  std::printf("cpu path %s | GEMM %s | %d threads | fp32 peak %.1f GFLOP/s (%s)\n", cpu_path_name().c_str(),
              kernels::gemm_backend_name(), threads, peak_gflops, kernels::peak_kernel_name(peak_kernel));

  const std::filesystem::path shared = std::filesystem::path(TITAN_SOURCE_DIR) / "../shared/assets";
  const std::filesystem::path dump = std::filesystem::temp_directory_path() / "titan_train_bench";
  models::register_config_functions();
  config::JobConfig c = config::find_config("qwen3_0_6b").fn();
  c.model.n_layers = layers;
  c.model.hf_assets_path = (shared / "qwen3-tokenizer").string();
  c.training.dataset_path = (shared / "text/tinyshakespeare.txt").string();
  c.training.local_batch_size = 1;
  c.training.seq_len = seq;
  c.training.steps = steps;
  c.training.max_norm = 1.0;
  c.optimizer.lr = 3e-4;
  c.lr_scheduler.warmup_steps = 0;
  c.job.dump_folder = dump.string();
  c.metrics.log_freq = 1;
  c.metrics.enable_jsonl = false;
  c.metrics.peak_tflops = peak_gflops / 1e3;

  const train::TrainSummary run = train::run_training(c, "qwen3_0_6b (train_bench)");
  std::vector<double> seconds, waits;
  for (size_t i = 1; i < run.steps.size(); ++i) {
    seconds.push_back(run.steps[i].seconds);
    waits.push_back(run.steps[i].data_wait_seconds);
  }
  const double median_s = bench::median(seconds);
  const double tokens = static_cast<double>(seq);
  nn::DecoderConfig model_config = models::find_size("0.6B").config;
  model_config.num_layers = layers;
  const double flops_per_token = models::train_flops_per_token(model_config, seq);
  const double gflops = tokens * flops_per_token / median_s / 1e9;
  const double rss_mib = static_cast<double>(process_peak_rss_bytes()) / (1 << 20);
  std::printf("\nours: median %.3f s/step over steps 2..%ld | %.1f tokens/s | %.1f GFLOP/s | MFU %.1f%% | "
              "data wait %.4f s/step | peak RSS %.0f MiB\n",
              median_s, static_cast<long>(steps), tokens / median_s, gflops, 100.0 * gflops / peak_gflops,
              bench::median(waits), rss_mib);
  std::filesystem::remove_all(dump);
  if (!peer_enabled) return 0;

  const std::string cmd = str("python3 ", TITAN_SOURCE_DIR, "/tools/bench_torch_qwen3.py --train-step --threads ",
                              threads, " --layers ", layers, " --batch 1 --seq ", seq, " --repeats ", steps - 1);
  std::printf("\npeer: %s\n", cmd.c_str());
  std::fflush(stdout);
  const bench::PeerRun peer = bench::run_peer(cmd);
  std::fputs(peer.output.c_str(), stdout);
  if (!peer.ok()) {
    std::printf("peer failed (exit %d); install tools/requirements.txt to compare\n", peer.exit_code);
    return 1;
  }
  const double peer_s = peer.result["median_s"].get<double>();
  const double peer_gflops = peer.result["gflops"].get<double>();
  const double peer_rss = peer.result["peak_rss_mib"].get<double>();
  std::printf("\n| impl (full training step) | s/step | tokens/s | GFLOP/s | MFU | peak RSS MiB |\n"
              "|---|---|---|---|---|---|\n");
  std::printf("| titan.cpp | %.3f | %.1f | %.1f | %.1f%% | %.0f |\n", median_s, tokens / median_s, gflops,
              100.0 * gflops / peak_gflops, rss_mib);
  std::printf("| PyTorch %s eager + AdamW | %.3f | %.1f | %.1f | %.1f%% | %.0f |\n",
              peer.result["torch_version"].get<std::string>().c_str(), peer_s,
              peer.result["tokens_per_s"].get<double>(), peer_gflops, 100.0 * peer_gflops / peak_gflops, peer_rss);
  std::printf("\nspeed-up vs PyTorch: %.2fx | peak RSS ratio (ours / PyTorch): %.2f\n", peer_s / median_s,
              rss_mib / peer_rss);
  bench::print_result({{"impl", "titan.cpp"}, {"median_s", median_s}, {"gflops", gflops},
                       {"mfu", gflops / peak_gflops}, {"peak_rss_mib", rss_mib},
                       {"speedup_vs_pytorch", peer_s / median_s}, {"rss_ratio", rss_mib / peer_rss}});
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_bench: error: %s\n", e.what());
  return 1;
}
