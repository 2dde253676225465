// Attention op benchmark: the CPU kernel's forward and backward at one shape, in each compute
// precision (f32; bf16 on the CPU's bf16 dot products where it has them; bf16 emulated with f32
// FMAs), as time and GFLOP/s of the causal FLOPs (forward 4 B H K T^2 / 2, backward 2.5x that,
// as attention.md counts them). The peer here is the f32 kernel: the bf16 rows print their speed
// ratio to it.
//
//   build/bench/attention_bench [--batch 1] [--seq 2048] [--heads 16] [--kv-heads 8] [--head-dim 128]
//                               [--repeats 5] [--only f32|bf16|emulated]   (one row, e.g. for perf)
#include <cstdio>
#include <string>

#include "harness.h"
#include "titan/core/cpu_features.h"
#include "titan/core/parallel.h"
#include "titan/core/rng.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/ops/attention/attention.h"

using namespace titan;

namespace {

struct Options {
  int64_t batch = 1, seq = 2048, heads = 16, kv_heads = 8, head_dim = 128;
  int repeats = 5;
  std::string only;  // empty: every row
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> int64_t {
      TITAN_CHECK(i + 1 < argc, "attention_bench: ", a, " needs a value");
      return std::stoll(argv[++i]);
    };
    if (a == "--batch") o.batch = next();
    else if (a == "--seq") o.seq = next();
    else if (a == "--heads") o.heads = next();
    else if (a == "--kv-heads") o.kv_heads = next();
    else if (a == "--head-dim") o.head_dim = next();
    else if (a == "--repeats") o.repeats = static_cast<int>(next());
    else if (a == "--only" && i + 1 < argc) o.only = argv[++i];
    else TITAN_FAIL("attention_bench: unknown flag ", a, ". HINT: see the usage at the top of bench/attention_bench.cpp");
  }
  return o;
}

Tensor random(const Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape);
  Rng(seed).fill_normal(t.data<float>(), t.numel(), 0.0f, 1.0f);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const int64_t B = o.batch, T = o.seq, H = o.heads, G = o.kv_heads, K = o.head_dim;
  const Tensor q = random({B, T, H, K}, 1), k = random({B, T, G, K}, 2), v = random({B, T, G, K}, 3),
               dout = random({B, T, H, K}, 4);
  Tensor out = Tensor::empty(q.shape()), dq = Tensor::empty(q.shape()), dk = Tensor::empty(k.shape()),
         dv = Tensor::empty(k.shape());
  const double fwd_flops = 4.0 * B * H * K * T * T / 2.0, bwd_flops = 2.5 * fwd_flops;
  std::printf("attention_bench: B=%lld T=%lld H=%lld G=%lld K=%lld causal, %d threads, cpu path %s, gemm %s\n",
              static_cast<long long>(B), static_cast<long long>(T), static_cast<long long>(H),
              static_cast<long long>(G), static_cast<long long>(K), num_threads(), cpu_path_name().c_str(),
              kernels::gemm_backend_name());
  const ops::AttentionImpl& impl = ops::attention_table().impls().back();  // the CPU kernel
  bench::Table table({{"compute", -14}, {"fwd ms", 9}, {"fwd GFLOP/s", 12}, {"bwd ms", 9}, {"bwd GFLOP/s", 12},
                      {"fwd+bwd ms", 11}, {"speed-up", 9}});
  table.print_header();
  struct Row {
    const char* name;
    ops::AttentionArgs args;
  };
  const Row rows[] = {{"f32", {0.0f, DType::f32, false}},
                      {"bf16", {0.0f, DType::bf16, false}},
                      {"emulated", {0.0f, DType::bf16, true}}};
  double f32_total = 0.0;
  nlohmann::json result;
  for (const Row& r : rows) {
    if (!o.only.empty() && o.only != r.name) continue;
    ops::AttentionSaved saved{Tensor::empty({B, H, T})};
    const bench::Timing f = bench::time_it([&] { impl.forward(r.args, q, k, v, out, saved); }, 1, o.repeats);
    const bench::Timing b =
        bench::time_it([&] { impl.backward(r.args, dout, Tensor(), q, k, v, out, saved, dq, dk, dv); }, 1, o.repeats);
    const double total = f.median_s + b.median_s;
    if (f32_total == 0.0) f32_total = total;
    table.print_row({r.name, bench::fixed(f.median_s * 1e3), bench::fixed(fwd_flops / f.median_s / 1e9),
                     bench::fixed(b.median_s * 1e3), bench::fixed(bwd_flops / b.median_s / 1e9),
                     bench::fixed(total * 1e3), bench::fixed(f32_total / total, 2) + "x"});
    result[r.name] = {{"forward_s", f.median_s}, {"backward_s", b.median_s}};
  }
  bench::print_result(result);
  return 0;
}
