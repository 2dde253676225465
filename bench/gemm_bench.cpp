// gemm_bench: GFLOP/s and % of this machine's measured 2-thread fp32 peak for titan's GEMM
// seam (kernels::gemm) at the linear-layer shapes of the bench config, in all three forms
// (fwd y = x w^T, dX = dy w, dW += dy^T x), plus the fused lm_head + cross-entropy op
// (3 GEMMs over token chunks) at the same lm_head shape.
//
//   OMP_NUM_THREADS=2 build-lin/bench/gemm_bench [--tokens N] [--min-seconds S] [--only LAYER]
//                                                [--no-fused] [--xent-chunks C1,C2,...] [--bf16]
// --only lm_head_xent times the fused op alone; --xent-chunks times it at the given chunk_tokens
// values (default: auto only). --bf16 times the bf16 products instead, each shape on every bf16
// kernel this CPU has side by side (oneDNN's matmul or its emulation, titan's AMX, AVX-512-BF16 and
// AVX2 FMA kernels), each in % of the peak of the instruction it runs, and the fused op on bf16 x
// and the f32 master weight (the head of a bf16-compute step).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "gemm_shapes.h"
#include "harness.h"
#include "titan/kernels/cpu/peak.h"
#include "titan/core/parallel.h"
#include "titan/core/rng.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/gemm_bf16_amx.h"
#include "titan/kernels/cpu/gemm_bf16_avx2.h"
#include "titan/kernels/cpu/gemm_bf16_avx512.h"
#include "titan/ops/softmax_xent/softmax_xent.h"

using namespace titan;
using namespace titan::bench;
using namespace titan::kernels;

// Warm-up once, then enough repeats to fill ~min_seconds (at least 3).
static Timing time_adaptive(const std::function<void()>& fn, double min_seconds) {
  const double t0 = now_seconds();
  fn();
  const double first = now_seconds() - t0;
  const int repeats = static_cast<int>(std::clamp(min_seconds / std::max(first, 1e-6), 3.0, 50.0));
  return time_it(fn, 0, repeats);
}

// Calls fn(shape, form, problem) for every (layer, form) of the bench config whose layer name
// contains `only` (all when empty).
template <class Fn>
static void for_each_problem(int64_t tokens, const std::string& only, Fn&& fn) {
  for (const LinearShape& shape : qwen3_bench_linear_shapes()) {
    if (!only.empty() && shape.layer.find(only) == std::string::npos) continue;
    for (const GemmForm form : kGemmForms) fn(shape, form, gemm_problem(form, tokens, shape));
  }
}

// The fused lm_head + cross-entropy op at the bench config's head shape: loss only (1 GEMM) and
// loss + dx + dw (3 GEMMs), at each chunk_tokens value (0: the op's own choice). With bf16
// operands x is bf16 and w the f32 master, as a bf16-compute training step passes them.
static void bench_fused(int64_t tokens, double min_seconds, const std::vector<int64_t>& xent_chunks, DType operands,
                        double peak, Table& table, nlohmann::json& rows) {
  const int64_t d = 1024, v = 151936;
  FloatBuffer xb(tokens * d), wb(v * d);
  Tensor x = Tensor::wrap(xb.data, {tokens, d}, DType::f32, nullptr);
  if (operands == DType::bf16) {
    Tensor rounded = Tensor::empty({tokens, d}, DType::bf16);
    for (int64_t i = 0; i < tokens * d; ++i) rounded.data<uint16_t>()[i] = f32_to_bf16(xb.data[i]);
    x = rounded;
  }
  const Tensor w = Tensor::wrap(wb.data, {v, d}, DType::f32, nullptr);
  Tensor targets = Tensor::empty({tokens}, DType::i64);
  Rng(7).fill_int(targets.data<int64_t>(), tokens, v);
  Tensor dx = Tensor::empty({tokens, d}), dw = Tensor::zeros({v, d}), none;
  for (const int64_t chunk_arg : xent_chunks) {
    const ops::LmHeadXentArgs args{-100, chunk_arg};
    const int64_t chunk = ops::lm_head_xent_chunk_tokens(args, tokens, v, operands);
    const std::string layer = "lm_head_xent (c=" + std::to_string(chunk) + ")";
    for (const bool grads : {false, true}) {
      const Timing t = time_adaptive([&] {
        ops::lm_head_xent(args, x, w, targets, 1.0f / static_cast<float>(tokens), grads ? dx : none,
                          grads ? dw : none);
      }, min_seconds);
      const double flops = (grads ? 6.0 : 2.0) * static_cast<double>(tokens) * v * d;
      const double gflops = flops / t.median_s * 1e-9;
      std::vector<std::string> cells = {layer, grads ? "all" : "loss", std::to_string(tokens), std::to_string(v),
                                        std::to_string(d)};
      if (operands == DType::bf16) cells.push_back("fused");
      for (const std::string& cell : {fixed(t.median_s * 1e3, 2), fixed(gflops), fixed(100.0 * gflops / peak)}) {
        cells.push_back(cell);
      }
      table.print_row(cells);
      rows.push_back({{"layer", "lm_head_xent"}, {"form", grads ? "loss+dx+dw" : "loss"},
                      {"dtype", operands == DType::bf16 ? "bf16" : "f32"}, {"chunk_tokens", chunk},
                      {"median_s", t.median_s}, {"gflops", gflops}});
    }
  }
}

// The bf16 products of every (layer, form) on every bf16 kernel this CPU has, alternating per
// shape: oneDNN's matmul (gemm_bf16's library; where oneDNN has no bf16 kernel, its emulation: A and
// B widened into f32 copies, then sgemm), titan's AMX and AVX-512-BF16 kernels, titan's AVX2 FMA
// kernel. Each row's % is of the peak of the instruction it runs: AMX tiles (oneDNN's matmul too
// where the CPU has them), the bf16 dot product, or the fp32 FMA (AVX2).
static int bench_bf16(int64_t tokens, double min_seconds, const std::string& only, bool fused,
                      const std::vector<int64_t>& xent_chunks) {
  const bool own = gemm_bf16_avx512_supported();
  const bool dot = peak_kernel_supported(PeakKernel::bf16_avx512);
  const bool emulated = gemm_bf16_is_emulated();
  const double dot_peak = dot ? measure_peak(PeakKernel::bf16_avx512, 2).median_gflops : 0.0;
  const double fma_peak = measure_peak(PeakKernel::fp32_avx2, 2).median_gflops;
  const bool amx = gemm_bf16_uses_amx();
  const double amx_peak = amx ? measure_peak(PeakKernel::bf16_amx, 2).median_gflops : 0.0;
  std::cout << "bf16 GEMMs, " << num_threads() << " threads; peaks (2 threads, measured now): "
            << (amx ? "AMX tiles " + fixed(amx_peak) + " GFLOP/s, " : "")
            << (dot ? "bf16 dot AVX-512 " + fixed(dot_peak) + " GFLOP/s, " : "no bf16 dot product, ")
            << "fp32 FMA AVX2 " << fixed(fma_peak) << " GFLOP/s"
            << (emulated ? "; oneDNN has no bf16 kernel here (its row is the emulation)" : "") << "\n"
            << "tokens N = " << tokens << "; median over >= 3 repeats after 1 warm-up\n\n";
  Table table({{"layer", -18}, {"form", -4}, {"M", 6}, {"N", 6}, {"K", 6}, {"kernel", -11}, {"ms", 9},
               {"GFLOP/s", 8}, {"% peak", 6}});
  table.print_header();
  using Bf16Gemm = void (*)(bool, bool, int64_t, int64_t, int64_t, float, const uint16_t*, int64_t, const uint16_t*,
                            int64_t, float, float*, int64_t);
  struct Kernel {
    const char* name;
    bool available;
    Bf16Gemm gemm;
    double peak;
  };
  const Kernel kernels[] = {{"onednn", true, gemm_bf16_onednn, emulated ? fma_peak : amx ? amx_peak : dot_peak},
                            {"titan-amx", amx, gemm_bf16_amx, amx_peak},
                            {"titan-512", own, gemm_bf16_avx512, dot_peak},
                            {"titan-avx2", true, gemm_bf16_avx2, fma_peak}};
  nlohmann::json rows = nlohmann::json::array();
  for_each_problem(tokens, only, [&](const LinearShape& shape, GemmForm form, const GemmProblem& p) {
    std::vector<uint16_t> a(p.a_rows() * p.a_cols()), b(p.b_rows() * p.b_cols());
    FloatBuffer fa(static_cast<int64_t>(a.size())), fb(static_cast<int64_t>(b.size())), c(p.m * p.n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = f32_to_bf16(fa.data[i]);
    for (size_t i = 0; i < b.size(); ++i) b[i] = f32_to_bf16(fb.data[i]);
    for (const Kernel& kernel : kernels) {
      if (!kernel.available) continue;
      const Timing t = time_adaptive([&] {
        kernel.gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, 1.0f, a.data(), p.a_cols(), b.data(), p.b_cols(), p.beta,
                    c.data, p.n);
      }, min_seconds);
      const double gflops = p.flops() / t.median_s * 1e-9;
      table.print_row({shape.layer, form_name(form), std::to_string(p.m), std::to_string(p.n),
                       std::to_string(p.k), kernel.name, fixed(t.median_s * 1e3, 2), fixed(gflops),
                       kernel.peak > 0.0 ? fixed(100.0 * gflops / kernel.peak) : "-"});
      rows.push_back({{"layer", shape.layer}, {"form", form_name(form)}, {"kernel", kernel.name}, {"m", p.m},
                      {"n", p.n}, {"k", p.k}, {"median_s", t.median_s}, {"gflops", gflops},
                      {"peak_gflops", kernel.peak}});
    }
  });
  if (fused && (only.empty() || std::string("lm_head_xent").find(only) != std::string::npos)) {
    // The fused op's % is of the peak of the kernel gemm_bf16 runs here.
    bench_fused(tokens, min_seconds, xent_chunks, DType::bf16, amx ? amx_peak : own && dot ? dot_peak : fma_peak,
                table, rows);
  }
  print_result({{"bench", "gemm_bench_bf16"}, {"threads", num_threads()}, {"tokens", tokens},
                {"amx_peak_gflops", amx_peak}, {"bf16_dot_peak_gflops", dot_peak}, {"fp32_fma_peak_gflops", fma_peak}, {"rows", rows}});
  return 0;
}

int main(int argc, char** argv) {
  int64_t tokens = kBenchTokens;
  double min_seconds = 3.0;
  std::string only;
  bool fused = true;
  std::vector<int64_t> xent_chunks = {0};  // 0 = auto
  bool bf16 = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--tokens") && i + 1 < argc) {
      tokens = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--min-seconds") && i + 1 < argc) {
      min_seconds = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else if (!std::strcmp(argv[i], "--bf16")) {
      bf16 = true;
    } else if (!std::strcmp(argv[i], "--no-fused")) {
      fused = false;
    } else if (!std::strcmp(argv[i], "--xent-chunks") && i + 1 < argc) {
      xent_chunks.clear();
      for (char* p = argv[++i]; *p != '\0';) {
        xent_chunks.push_back(std::strtoll(p, &p, 10));
        if (*p == ',') ++p;
      }
    } else {
      std::cerr << "usage: gemm_bench [--tokens N] [--min-seconds S] [--only LAYER] [--no-fused] [--xent-chunks C1,C2]\n";
      return 2;
    }
  }
  const int threads = num_threads();
  if (bf16) return bench_bf16(tokens, min_seconds, only, fused, xent_chunks);
  const PeakKernel peak_kernel = best_fp32_kernel();
  const double peak = measure_peak(peak_kernel, 2).median_gflops;
  std::cout << "GEMM: " << kernels::gemm_backend_name() << ", " << threads << " threads\n"
            << "peak: " << fixed(peak) << " GFLOP/s (" << peak_kernel_name(peak_kernel)
            << ", 2 threads, measured now)\n"
            << "tokens N = " << tokens << "; median over >= 3 repeats after 1 warm-up\n\n";

  Table table({{"layer", -26}, {"form", -4}, {"M", 6}, {"N", 6}, {"K", 6}, {"ms", 9}, {"GFLOP/s", 8}, {"% peak", 6}});
  table.print_header();
  nlohmann::json rows = nlohmann::json::array();
  for_each_problem(tokens, only, [&](const LinearShape& shape, GemmForm form, const GemmProblem& p) {
    FloatBuffer a(p.a_rows() * p.a_cols()), b(p.b_rows() * p.b_cols()), c(p.m * p.n);
    const Timing t = time_adaptive([&] {
      kernels::gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, 1.0f, a.data, p.a_cols(), b.data,
                    p.b_cols(), p.beta, c.data, p.n);
    }, min_seconds);
    const double gflops = p.flops() / t.median_s * 1e-9;
    table.print_row({shape.layer, form_name(form), std::to_string(p.m), std::to_string(p.n),
                     std::to_string(p.k), fixed(t.median_s * 1e3, 2), fixed(gflops),
                     fixed(100.0 * gflops / peak)});
    rows.push_back({{"layer", shape.layer}, {"form", form_name(form)}, {"m", p.m}, {"n", p.n},
                    {"k", p.k}, {"median_s", t.median_s}, {"gflops", gflops}});
  });

  if (fused && (only.empty() || std::string("lm_head_xent").find(only) != std::string::npos)) {
    bench_fused(tokens, min_seconds, xent_chunks, DType::f32, peak, table, rows);
  }
  print_result({{"bench", "gemm_bench"}, {"backend", kernels::gemm_backend_name()},
                {"threads", threads}, {"tokens", tokens}, {"peak_gflops", peak}, {"rows", rows}});
  return 0;
}
