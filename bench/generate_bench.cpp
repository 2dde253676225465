// Decode speed of `titan generate` (nn::generate with the KV cache, the path the command runs) on
// Qwen3-0.6B shapes (28 layers, hidden 1024, 16 heads, 8 kv heads, head_dim 128, FFN 3072,
// vocab 151936, tied embeddings; random weights), one stream, greedy, a ~32-token prompt and 64
// new tokens — against Hugging Face generate() (tools/bench_torch_generate.py) in the same
// precision, side by side in one invocation (titan first, in this process; then the peer).
//
//   build/bench/generate_bench [--layers 28] [--prompt 32] [--new 64] [--repeats 3]
//                              [--precision bf16|fp32] [--no-peer] [--profile]
//
// Decode tokens/s = (new - 1) / (time of the last step - time of the first step): the prefill is
// excluded on both sides. Median over --repeats runs after one warm-up run. Threads: OMP_NUM_THREADS
// (titan) and the same count passed to the peer.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "harness.h"
#include "titan/core/cpu_features.h"
#include "titan/core/parallel.h"
#include "titan/core/rng.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/models/builtin.h"
#include "titan/models/decoder/weights.h"
#include "titan/nn/generate.h"
#include "titan/ops/registry.h"

using namespace titan;

namespace {

struct Options {
  int64_t layers = 28, prompt = 32, new_tokens = 64;
  int repeats = 3;
  std::string precision = "bf16";
  bool peer = true;
  bool profile = false;  // per-op wall time of the timed titan runs
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw Error("generate_bench: " + a + " needs a value");
      return argv[++i];
    };
    if (a == "--layers") o.layers = std::stoll(next());
    else if (a == "--prompt") o.prompt = std::stoll(next());
    else if (a == "--new") o.new_tokens = std::stoll(next());
    else if (a == "--repeats") o.repeats = std::stoi(next());
    else if (a == "--precision") o.precision = next();
    else if (a == "--no-peer") o.peer = false;
    else if (a == "--profile") o.profile = true;
    else throw Error("generate_bench: unknown flag " + a);
  }
  if (o.precision != "bf16" && o.precision != "fp32") throw Error("generate_bench: --precision bf16 or fp32");
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  nn::DecoderConfig config = models::find_size("0.6B").config;
  config.num_layers = opt.layers;
  std::printf("decode bench: Qwen3 0.6B dims, %ld layers, prompt %ld, %ld new tokens, %s, %d threads\n",
              static_cast<long>(opt.layers), static_cast<long>(opt.prompt), static_cast<long>(opt.new_tokens),
              opt.precision.c_str(), num_threads());
  std::printf("cpu path %s | GEMM %s\n", cpu_path_name().c_str(), kernels::gemm_backend_name());

  double titan_tok_s = 0.0, titan_prefill_s = 0.0;
  {
    nn::Decoder model(config);
    models::init_weights(model, 0);
    model.prepare_inference(opt.precision == "bf16" ? DType::bf16 : DType::f32);
    Tensor ids = Tensor::empty({1, opt.prompt}, DType::i64);
    Rng(1).fill_int(ids.data<int64_t>(), opt.prompt, config.vocab_size);
    nn::GenerateOptions options;
    options.sampling.temperature = 0.0f;  // greedy; no EOS: every run makes all its tokens
    auto run = [&](int64_t n) {
      options.max_new_tokens = n;
      const double t0 = bench::now_seconds();
      double first = 0.0, last = 0.0;
      nn::generate(model, ids, {0}, options, [&](int64_t step, const std::vector<int64_t>&, const std::vector<bool>&) {
        last = bench::now_seconds();
        if (step == 0) first = last;
      });
      return std::pair<double, double>(first - t0, static_cast<double>(n - 1) / (last - first));
    };
    run(4);  // warm-up
    if (opt.profile) ops::set_op_profiling(true);
    std::vector<double> prefill, tok_s;
    for (int r = 0; r < opt.repeats; ++r) {
      const auto [p, t] = run(opt.new_tokens);
      prefill.push_back(p);
      tok_s.push_back(t);
    }
    if (opt.profile) {
      for (const ops::OpProfileEntry& e : ops::op_profile()) {
        std::printf("  %-28s %8.3f s %8ld calls\n", e.name.c_str(), e.seconds, static_cast<long>(e.calls));
      }
      ops::set_op_profiling(false);
    }
    titan_prefill_s = bench::median(prefill);
    titan_tok_s = bench::median(tok_s);
  }
  bench::Table table({{"contender", -34}, {"prefill s", 10}, {"decode tok/s", 13}, {"ratio", 7}});
  table.print_header();
  table.print_row({"titan " + opt.precision, bench::fixed(titan_prefill_s, 3), bench::fixed(titan_tok_s, 2), "1.00"});
  nlohmann::json result = {{"titan_decode_tok_s", titan_tok_s}, {"titan_prefill_s", titan_prefill_s},
                           {"precision", opt.precision}, {"layers", opt.layers}, {"threads", num_threads()}};
  if (opt.peer) {
    const std::string cmd = str("python3 ", TITAN_SOURCE_DIR, "/tools/bench_torch_generate.py --layers ", opt.layers,
                                " --prompt ", opt.prompt, " --new ", opt.new_tokens, " --repeats ", opt.repeats,
                                " --threads ", num_threads(), " --precision ", opt.precision);
    const bench::PeerRun peer = bench::run_peer(cmd);
    if (peer.ok()) {
      const double tok_s = peer.result["decode_tok_s"].get<double>();
      table.print_row({peer.result["peer"].get<std::string>(), bench::fixed(peer.result["prefill_s"].get<double>(), 3),
                       bench::fixed(tok_s, 2), bench::fixed(bench::ratio(tok_s, titan_tok_s), 2)});
      std::printf("titan / peer decode: %.2fx\n", bench::ratio(titan_tok_s, tok_s));
      result["peer"] = peer.result;
      result["ratio"] = bench::ratio(titan_tok_s, tok_s);
    } else {
      std::printf("peer failed (exit %d): %s\n", peer.exit_code, peer.output.c_str());
    }
  }
  bench::print_result(result);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "generate_bench: %s\n", e.what());
  return 1;
}
