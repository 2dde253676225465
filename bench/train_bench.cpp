// Full training steps of the bench config — Qwen3-0.6B shapes with model.n_layers=4, B=1, T=2048:
// data (PrefetchLoader over tinyshakespeare with the real Qwen3 tokenizer) + forward + backward +
// clip + AdamW, through the same run_training() that `titan train` runs — against Hugging Face
// Qwen3ForCausalLM + torch.nn.utils.clip_grad_norm_ + torch.optim.AdamW
// (tools/bench_torch_qwen3.py --train-step) in three ways a PyTorch user trains it: fp32 eager,
// bf16 autocast, bf16 autocast + torch.compile. All side by side in one invocation.
//
//   build/bench/train_bench [--model qwen3|qwen3_5] [--layers 4] [--seq 2048] [--steps 4] [--quick]
//                           [--peers fp32,bf16,bf16-compile | --no-peer] [--titan fp32|bf16] [--bf16-states]
//                           [--muon] [--json FILE]
//
// --muon runs every contender with Muon instead of AdamW: titan's optimizer.name Muon, and
// torch.optim.Muon (adjust_lr_fn match_rms_adamw) over the blocks' 2-D weights + torch.optim.AdamW
// over the rest for PyTorch, as titan splits them.
//
// --bf16-states adds a titan row with bf16 compute and the AdamW moments in bf16
// (optimizer.state_dtype bfloat16): 4 bytes per parameter less.
//
// --model qwen3_5 runs the Qwen3.5-0.8B shape instead (size qwen3_5_0.8B: 3 gated DeltaNet layers
// and 1 gated attention layer per 4, vocabulary 248,320, tied) against Transformers'
// Qwen3_5ForCausalLM on its PyTorch fallback (the chunked delta rule and the causal conv1d in
// torch ops); titan's rows then also give the delta rule's share of the step (op profile) and its
// GFLOP/s against its FLOP count (models/decoder/flops.cpp).
//
// Every contender runs in its own child process, one after the other, so that each peak RSS
// (ru_maxrss) is its own: titan contenders are this binary re-run with --titan-child NAME, PyTorch
// contenders the Python script. Titan: median over steps 2..N (step 1 includes warm-up). PyTorch:
// N-1 timed steps after 1 untimed warm-up step (2 with torch.compile, which compiles in them; the
// compile time is reported apart). MFU is against the measured peak of the contender's precision
// (fp32 FMA; for bf16 the best of the AVX-512 bf16 dot products, the AMX tile loop and a large
// gemm_bf16, train/peak_flops.h: on AMX the tile loop's, several times oneDNN's best GEMM rate).
// Needs ../shared beside the checkout for the tokenizer and text (a benchmark, not the product).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "harness.h"
#include "titan/config/overrides.h"
#include "titan/config/registry.h"
#include "titan/core/allocator.h"
#include "titan/core/cpu_features.h"
#include "titan/core/openmp_env.h"
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/peak.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/flops.h"
#include "titan/ops/registry.h"
#include "titan/train/peak_flops.h"
#include "titan/train/trainer.h"

using namespace titan;

namespace {

// A titan contender = the bench config plus `titan train`-style config flags.
struct TitanContender {
  std::string name;
  std::string precision;               // "fp32" | "bf16": which measured peak its MFU is against
  std::vector<std::string> overrides;  // e.g. "--training.mixed_precision_param=bfloat16"
  bool on_by_default = true;
};

// --titan fp32 (or bf16) keeps one titan row only.
const std::vector<TitanContender> kTitanContenders = {
    {"titan fp32", "fp32", {}, true},
    {"titan bf16", "bf16", {"--training.mixed_precision_param=bfloat16"}, true},
    // --bf16-states: bf16 compute with the AdamW moments stored in bf16 (optimizer.state_dtype).
    {"titan bf16 + bf16 moments", "bf16",
     {"--training.mixed_precision_param=bfloat16", "--optimizer.state_dtype=bfloat16"}, false},
};

// A PyTorch contender = tools/bench_torch_qwen3.py flags (see its docstring).
struct PeerContender {
  std::string key;  // for --peers
  std::string name;
  std::string precision;
  std::string flags;
};

const std::vector<PeerContender> kPeerContenders = {
    {"fp32", "PyTorch eager fp32", "fp32", "--precision fp32"},
    {"bf16", "PyTorch bf16 autocast", "bf16", "--precision bf16-autocast"},
    {"bf16-compile", "PyTorch bf16 autocast + compile", "bf16", "--precision bf16-autocast --compile"},
};

struct BenchShape {
  int64_t layers = 4;
  int64_t seq = 2048;
  int64_t steps = 4;
  std::string model = "qwen3";  // or "qwen3_5"
  bool muon = false;            // --muon: every contender with Muon (+ AdamW for the rest)
};

// The named size a --model runs, with model.n_layers = layers.
nn::DecoderConfig bench_model_config(const BenchShape& shape) {
  nn::DecoderConfig c = models::find_size(shape.model == "qwen3_5" ? "qwen3_5_0.8B" : "0.6B").config;
  c.num_layers = shape.layers;
  if (!c.layer_types.empty()) c.layer_types.resize(static_cast<size_t>(shape.layers));  // the pattern's first L
  return c;
}

// tools/bench_torch_qwen3.py's model flags for --model.
std::string peer_model_flags(const BenchShape& shape) {
  if (shape.model != "qwen3_5") return "";
  const nn::DecoderConfig c = bench_model_config(shape);
  return str(" --arch qwen3_5 --hidden ", c.dim, " --heads ", c.num_heads, " --kv-heads ", c.num_kv_heads,
             " --head-dim ", c.head_dim, " --intermediate ", c.hidden_dim, " --vocab ", c.vocab_size,
             " --rope-theta ", c.rope_theta, " --linear-key-heads ", c.linear_num_key_heads, " --linear-value-heads ",
             c.linear_num_value_heads, " --linear-head-dim ", c.linear_key_head_dim, c.tie_embeddings ? "" : " --untied");
}

struct Row {
  std::string name;
  std::string kind;  // "titan" | "pytorch"
  std::string precision;
  bool ok = false;
  std::string error;
  double median_s = NAN;
  double tokens_per_s = NAN;
  double gflops = NAN;
  double peak_rss_mib = NAN;
  double compile_s = NAN;  // PyTorch with torch.compile only
  nlohmann::json detail;   // the child's RESULT
};

const TitanContender& find_titan(const std::string& name) {
  for (const TitanContender& c : kTitanContenders)
    if (c.name == name) return c;
  TITAN_FAIL("train_bench: no titan contender '", name, "' (titan fp32, titan bf16)");
}

// Runs one titan contender in this process and prints its RESULT line (the --titan-child mode).
int run_titan_child(const TitanContender& contender, const BenchShape& shape, double peak_gflops) {
  const std::filesystem::path shared = std::filesystem::path(TITAN_SOURCE_DIR) / "../shared/assets";
  const std::filesystem::path dump =
      std::filesystem::temp_directory_path() / str("titan_train_bench_", ::getpid());
  models::register_config_functions();
  config::JobConfig c = config::find_config("qwen3_0_6b").fn();
  if (shape.model == "qwen3_5") c.model.name = "qwen3_5_0.8B";
  c.model.n_layers = shape.layers;
  c.model.hf_assets_path = (shared / "qwen3-tokenizer").string();
  c.training.dataset_path = (shared / "text/tinyshakespeare.txt").string();
  c.training.local_batch_size = 1;
  c.training.seq_len = shape.seq;
  c.training.steps = shape.steps;
  c.training.max_norm = 1.0;
  c.optimizer.lr = 3e-4;
  c.lr_scheduler.warmup_steps = 0;
  c.job.dump_folder = dump.string();
  c.metrics.log_freq = 1;
  c.metrics.enable_jsonl = false;
  if (peak_gflops > 0.0) c.metrics.peak_tflops = peak_gflops / 1e3;
  std::vector<std::string> overrides = contender.overrides;
  if (shape.muon) overrides.push_back("--optimizer.name=Muon");
  c = config::apply_cli_overrides(c, overrides);

  const bool delta_rule = shape.model == "qwen3_5";
  if (delta_rule) ops::set_op_profiling(true);  // the delta rule's share (one relaxed load per op otherwise)
  const train::TrainSummary run = train::run_training(c, str(c.model.name, " (train_bench, ", contender.name, ")"));
  nlohmann::json delta = nullptr;
  if (delta_rule) {
    ops::set_op_profiling(false);
    double delta_s = 0.0, all_s = 0.0;
    for (const ops::OpProfileEntry& e : ops::op_profile()) {
      if (e.name.rfind("gated_delta_", 0) == 0) delta_s += e.seconds;
    }
    for (const auto& step : run.steps) all_s += step.seconds;
    const nn::DecoderConfig m = bench_model_config(shape);
    const double delta_flops = models::delta_rule_flops_per_token(m) * static_cast<double>(shape.seq) *
                               static_cast<double>(run.steps.size());
    std::printf("\ndelta rule (gated_delta forward + backward, all %zu steps): %.3f s of %.3f s = %.1f%% of the steps; "
                "%.1f GFLOP/s against its FLOP count (%.2f%% of the step's FLOPs)\n",
                run.steps.size(), delta_s, all_s, 100.0 * delta_s / all_s, delta_flops / delta_s / 1e9,
                100.0 * delta_flops / (models::train_flops_per_token(m, shape.seq) * static_cast<double>(shape.seq) *
                                       static_cast<double>(run.steps.size())));
    delta = {{"seconds", delta_s}, {"step_seconds", all_s}, {"share", delta_s / all_s},
             {"gflops", delta_flops / delta_s / 1e9}};
  }
  std::vector<double> seconds, waits;
  for (size_t i = 1; i < run.steps.size(); ++i) {
    seconds.push_back(run.steps[i].seconds);
    waits.push_back(run.steps[i].data_wait_seconds);
  }
  const double median_s = bench::median(seconds);
  const double tokens = static_cast<double>(shape.seq);
  const nn::DecoderConfig model_config = bench_model_config(shape);
  const double flops_per_token = models::train_flops_per_token(model_config, shape.seq);
  const double gflops = tokens * flops_per_token / median_s / 1e9;
  const double rss_mib = static_cast<double>(process_peak_rss_bytes()) / (1 << 20);
  std::printf("\n%s: median %.3f s/step over steps 2..%ld | %.1f tokens/s | %.1f GFLOP/s | data wait %.4f s/step | "
              "peak RSS %.0f MiB\n",
              contender.name.c_str(), median_s, static_cast<long>(shape.steps), tokens / median_s, gflops,
              bench::median(waits), rss_mib);
  std::filesystem::remove_all(dump);
  nlohmann::json step_times = nlohmann::json::array();
  for (const double s : seconds) step_times.push_back(s);
  bench::print_result({{"impl", "titan.cpp"},
                       {"contender", contender.name},
                       {"precision", contender.precision},
                       {"overrides", contender.overrides},
                       {"median_s", median_s},
                       {"tokens_per_s", tokens / median_s},
                       {"gflops", gflops},
                       {"peak_rss_mib", rss_mib},
                       {"data_wait_s", bench::median(waits)},
                       {"step_times_s", step_times},
                       {"delta_rule", delta}});
  return 0;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

// Fills a row from a child's RESULT; a failed child leaves ok = false with the reason.
Row row_from_run(const std::string& name, const std::string& kind, const std::string& precision,
                 const bench::PeerRun& run) {
  Row row;
  row.name = name;
  row.kind = kind;
  row.precision = precision;
  if (!run.ok()) {
    row.error = str("exit ", run.exit_code, run.result.is_null() ? ", no RESULT line" : "");
    return row;
  }
  const nlohmann::json& r = run.result;
  row.ok = true;
  row.median_s = r["median_s"].get<double>();
  row.tokens_per_s = r["tokens_per_s"].get<double>();
  row.gflops = r["gflops"].get<double>();
  row.peak_rss_mib = r["peak_rss_mib"].get<double>();
  if (r.value("compile", false)) row.compile_s = r.value("compile_s", NAN);
  row.detail = r;
  return row;
}

std::string cell(double value, int decimals) { return bench::fixed(value, decimals); }

}  // namespace

int main(int argc, char** argv) try {
  // A titan row runs as `titan train` does, with titan's OpenMP wait (core/openmp_env.h); the
  // PyTorch rows, started by the parent, keep the environment the user gave.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--titan-child") reexec_with_openmp_wait_default(argv);
  }
  BenchShape shape;
  std::vector<std::string> peer_keys;
  for (const PeerContender& p : kPeerContenders) peer_keys.push_back(p.key);
  std::string titan_only;  // --titan fp32|bf16: one titan row
  bool bf16_states = false;  // --bf16-states: the row with bf16 AdamW moments too
  std::string titan_child, json_path;
  double peak_arg = 0.0;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      TITAN_CHECK(i + 1 < argc, "train_bench: ", a, " needs a value");
      return argv[++i];
    };
    if (a == "--layers") shape.layers = std::stoll(value());
    else if (a == "--seq") shape.seq = std::stoll(value());
    else if (a == "--steps") shape.steps = std::stoll(value());
    else if (a == "--quick") shape.layers = 1, shape.seq = 128, shape.steps = 2;  // flags after it still override
    else if (a == "--no-peer") peer_keys.clear();
    else if (a == "--peers") peer_keys = split_commas(value());
    else if (a == "--titan") titan_only = value();
    else if (a == "--bf16-states") bf16_states = true;
    else if (a == "--json") json_path = value();
    else if (a == "--titan-child") titan_child = value();
    else if (a == "--peak-gflops") peak_arg = std::stod(value());
    else if (a == "--model") shape.model = value();
    else if (a == "--muon") shape.muon = true;
    else
      TITAN_FAIL("train_bench: unknown flag ", a,
                 " (--model qwen3|qwen3_5 --layers --seq --steps --quick --peers fp32,bf16,bf16-compile --no-peer "
                 "--titan fp32|bf16 --bf16-states --muon --json FILE)");
  }
  TITAN_CHECK(shape.model == "qwen3" || shape.model == "qwen3_5", "train_bench: --model ", shape.model,
              " is not qwen3 or qwen3_5");
  TITAN_CHECK(shape.steps >= 2, "train_bench: --steps must be >= 2 (step 1 is warm-up)");
  for (const std::string& k : peer_keys) {
    bool known = false;
    for (const PeerContender& p : kPeerContenders) known = known || p.key == k;
    TITAN_CHECK(known, "train_bench: unknown peer '", k, "' in --peers (fp32, bf16, bf16-compile)");
  }
  if (!titan_child.empty()) return run_titan_child(find_titan(titan_child), shape, peak_arg);

  const int threads = num_threads();
  // The trainer's peaks (train/peak_flops.h): measured on a quiet machine and cached, per precision;
  // MFU goes through checked_mfu, which re-measures or raises a beaten peak (never above 100%).
  train::PeakFlops fp32_peak = train::device_peak_flops(0.0, train::Precision::float32);
  train::PeakFlops bf16_peak = train::device_peak_flops(0.0, train::Precision::bfloat16);
  std::printf("cpu path %s | GEMM %s | %d threads | fp32 peak %.1f GFLOP/s (%s) | bf16 peak %.1f GFLOP/s (%s)\n",
              cpu_path_name().c_str(), kernels::gemm_backend_name(), threads, fp32_peak.flops / 1e9,
              fp32_peak.source.c_str(), bf16_peak.flops / 1e9, bf16_peak.source.c_str());
  std::printf("shape: %s dims, %ld layer(s), B=1, T=%ld, %ld steps\n",
              shape.model == "qwen3_5" ? "Qwen3.5-0.8B" : "Qwen3-0.6B", static_cast<long>(shape.layers),
              static_cast<long>(shape.seq), static_cast<long>(shape.steps));
  auto peak_of = [&](const std::string& precision) -> train::PeakFlops& {
    return precision == "bf16" ? bf16_peak : fp32_peak;
  };

  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string shape_flags =
      str(" --model ", shape.model, " --layers ", shape.layers, " --seq ", shape.seq, " --steps ", shape.steps,
          shape.muon ? " --muon" : "");
  std::vector<Row> rows;
  std::vector<std::string> titan_names;
  for (const TitanContender& t : kTitanContenders) {
    const bool on = t.on_by_default || (bf16_states && t.name == "titan bf16 + bf16 moments");
    if (!on || (!titan_only.empty() && t.precision != titan_only)) continue;
    const double peak = peak_of(t.precision).flops / 1e9;
    const std::string cmd = str(bench::shell_quote(self), " --titan-child ", bench::shell_quote(t.name), shape_flags,
                                str(" --peak-gflops ", peak));
    std::printf("\n== %s: %s\n", t.name.c_str(), cmd.c_str());
    const bench::PeerRun run = bench::run_peer(cmd);
    std::fputs(run.output.c_str(), stdout);
    rows.push_back(row_from_run(t.name, "titan", t.precision, run));
    titan_names.push_back(t.name);
  }
  for (const PeerContender& p : kPeerContenders) {
    bool wanted = false;
    for (const std::string& k : peer_keys) wanted = wanted || k == p.key;
    if (!wanted) continue;
    const std::string cmd = str("python3 ", TITAN_SOURCE_DIR, "/tools/bench_torch_qwen3.py --train-step --threads ",
                                threads, " --layers ", shape.layers, " --batch 1 --seq ", shape.seq, " --repeats ",
                                shape.steps - 1, peer_model_flags(shape), " ", p.flags,
                                shape.muon ? " --optimizer muon" : "");
    std::printf("\n== %s: %s\n", p.name.c_str(), cmd.c_str());
    const bench::PeerRun run = bench::run_peer(cmd);
    std::fputs(run.output.c_str(), stdout);
    rows.push_back(row_from_run(p.name, "pytorch", p.precision, run));
    if (!rows.back().ok)
      std::printf("%s failed (%s); install tools/requirements.txt to compare\n", p.name.c_str(),
                  rows.back().error.c_str());
  }

  // One row per contender; for each titan contender T two ratio columns: T's tokens/s over the
  // row's (> 1: T is faster) and T's peak RSS over the row's (< 1: T uses less).
  std::string torch_version;
  for (const Row& r : rows)
    if (r.kind == "pytorch" && r.ok) torch_version = r.detail.value("torch_version", "");
  std::printf("\n| contender (full training step) | precision | s/step | tokens/s | GFLOP/s | MFU | peak RSS MiB | "
              "compile s |");
  for (const std::string& t : titan_names) std::printf(" %s speed-up | %s RSS ratio |", t.c_str(), t.c_str());
  std::printf("\n|---|---|---:|---:|---:|---:|---:|---:|");
  for (size_t i = 0; i < titan_names.size(); ++i) std::printf("---:|---:|");
  std::printf("\n");
  nlohmann::json contenders = nlohmann::json::array();
  bool all_ok = true;
  for (const Row& r : rows) {
    all_ok = all_ok && r.ok;
    const double mfu = r.ok ? train::checked_mfu(r.gflops * 1e9, peak_of(r.precision)) / 100.0 : NAN;
    std::printf("| %s | %s | %s | %s | %s | %s | %s | %s |", r.name.c_str(), r.precision.c_str(),
                r.ok ? cell(r.median_s, 3).c_str() : str("failed: ", r.error).c_str(), cell(r.tokens_per_s, 1).c_str(),
                cell(r.gflops, 1).c_str(), std::isnan(mfu) ? "-" : str(bench::fixed(100.0 * mfu), "%").c_str(),
                cell(r.peak_rss_mib, 0).c_str(), cell(r.compile_s, 1).c_str());
    nlohmann::json ratios = nlohmann::json::object();
    for (const std::string& t : titan_names) {
      const Row* tr = nullptr;
      for (const Row& x : rows)
        if (x.name == t) tr = &x;
      const double speedup = bench::ratio(tr->tokens_per_s, r.tokens_per_s);
      const double rss_ratio = bench::ratio(tr->peak_rss_mib, r.peak_rss_mib);
      std::printf(" %s | %s |", std::isnan(speedup) ? "-" : str(bench::fixed(speedup, 2), "x").c_str(),
                  cell(rss_ratio, 2).c_str());
      ratios[t] = {{"speedup", std::isnan(speedup) ? nlohmann::json() : nlohmann::json(speedup)},
                   {"rss_ratio", std::isnan(rss_ratio) ? nlohmann::json() : nlohmann::json(rss_ratio)}};
    }
    std::printf("\n");
    auto num = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
    contenders.push_back({{"name", r.name},
                          {"kind", r.kind},
                          {"precision", r.precision},
                          {"ok", r.ok},
                          {"error", r.error},
                          {"median_s", num(r.median_s)},
                          {"tokens_per_s", num(r.tokens_per_s)},
                          {"gflops", num(r.gflops)},
                          {"mfu", num(mfu)},
                          {"peak_rss_mib", num(r.peak_rss_mib)},
                          {"compile_s", num(r.compile_s)},
                          {"vs_titan", ratios},
                          {"detail", r.detail}});
  }
  if (!torch_version.empty()) std::printf("\nPyTorch %s; ", torch_version.c_str());
  std::printf("speed-up = titan's tokens/s / the row's; RSS ratio = titan's peak RSS / the row's.\n");

  nlohmann::json result = {{"shape", {{"model", shape.model}, {"layers", shape.layers}, {"seq", shape.seq},
                                      {"steps", shape.steps}}},
                           {"threads", threads},
                           {"fp32_peak_gflops", fp32_peak.flops / 1e9},
                           {"bf16_peak_gflops", bf16_peak.flops / 1e9},
                           {"contenders", contenders}};
  // The keys of the earlier single-peer RESULT (titan fp32 vs PyTorch eager fp32), when both ran.
  for (const Row& t : rows)
    for (const Row& p : rows)
      if (t.name == "titan fp32" && t.ok && p.name == kPeerContenders[0].name && p.ok) {
        result.update({{"impl", "titan.cpp"},
                       {"median_s", t.median_s},
                       {"gflops", t.gflops},
                       {"mfu", train::checked_mfu(t.gflops * 1e9, fp32_peak) / 100.0},
                       {"peak_rss_mib", t.peak_rss_mib},
                       {"speedup_vs_pytorch", p.median_s / t.median_s},
                       {"rss_ratio", t.peak_rss_mib / p.peak_rss_mib}});
      }
  if (!json_path.empty()) {
    std::ofstream(json_path) << result.dump(2) << "\n";
    std::printf("wrote %s\n", json_path.c_str());
  }
  bench::print_result(result);
  return all_ok ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_bench: error: %s\n", e.what());
  return 1;
}
