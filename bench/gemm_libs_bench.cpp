// gemm_libs_bench: the GEMM library choice, by measurement. Times single-precision GEMM from
// oneDNN (what kernels/cpu/gemm.h uses), OpenBLAS, BLIS and Eigen at the bench config's
// linear-layer shapes in all three forms, plus oneDNN's bf16 GEMM (bf16 in, f32 out) for the
// record. Several BLAS libraries in one process clash (same cblas_* symbols, different thread
// pools), so each library runs in its own child process (this binary with --child LIB), loaded
// with dlopen(RTLD_LOCAL); the parent collects each child's RESULT line into one table.
// OpenBLAS runs twice: with the environment as inherited and with OPENBLAS_CORETYPE /
// OPENBLAS_L2_SIZE unset (forcing a core type can select a slower kernel than autodetection).
//
//   build-lin/bench/gemm_libs_bench [--threads T] [--tokens N] [--min-seconds S] [--runs R] [--only LAYER]
//                                   [--libs onednn,onednn-bf16,openblas,openblas-unset,blis,eigen,eigen-avx2]
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits.h>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.h>

#include "gemm_shapes.h"
#include "harness.h"
#include "titan/core/cpu_features.h"
#include "titan/core/dtype.h"
#include "titan/kernels/cpu/gemm.h"

// Exported by libdnnl but not declared in its public 2.x headers (oneDNN's own tests declare it
// the same way). Row-major like dnnl_sgemm; A and B are bf16 bit patterns.
extern "C" dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t M, dnnl_dim_t N,
                                               dnnl_dim_t K, float alpha, const uint16_t* A,
                                               dnnl_dim_t lda, const uint16_t* B, dnnl_dim_t ldb,
                                               float beta, float* C, dnnl_dim_t ldc);

using namespace titan;
using namespace titan::bench;

namespace {

const char* kOpenBlasPath = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0";
const char* kBlisPath = "/usr/lib/x86_64-linux-gnu/blis-openmp/libblis.so.4";
const char* kAllLibs = "onednn,onednn-bf16,openblas,openblas-unset,blis,eigen,eigen-avx2";

struct Options {
  int threads = 2;
  int64_t tokens = kBenchTokens;
  double min_seconds = 3.0;
  std::string only;
  std::string libs = kAllLibs;
  int runs = 3;  // rounds over all libraries (parent only)
};

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

// ---- child side: one library --------------------------------------------------------------

// A library = something that binds one problem's operands to a callable to time.
struct Backend {
  std::string detail;  // version / kernel / threads, as the library reports them
  std::function<std::function<void()>(const GemmProblem&, const float* a, const float* b, float* c)> bind;
};

// cblas (row-major = 101, no-trans = 111, trans = 112), 32-bit integers in both Debian builds.
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);

void* open_library(const std::string& path) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) throw std::runtime_error("dlopen " + path + ": " + ::dlerror());
  return handle;
}

template <class Fn>
Fn symbol(void* handle, const char* name, bool required = true) {
  void* p = ::dlsym(handle, name);
  if (p == nullptr && required) throw std::runtime_error(std::string("dlsym ") + name + " not found");
  return reinterpret_cast<Fn>(p);
}

Backend cblas_backend(void* handle, std::string detail) {
  auto sgemm = symbol<CblasSgemm>(handle, "cblas_sgemm");
  Backend b;
  b.detail = std::move(detail);
  b.bind = [sgemm](const GemmProblem& p, const float* a, const float* bb, float* c) -> std::function<void()> {
    return [=] {
      sgemm(101, p.trans_a ? 112 : 111, p.trans_b ? 112 : 111, static_cast<int>(p.m), static_cast<int>(p.n),
            static_cast<int>(p.k), 1.0f, a, static_cast<int>(p.a_cols()), bb, static_cast<int>(p.b_cols()),
            p.beta, c, static_cast<int>(p.n));
    };
  };
  return b;
}

Backend make_backend(const std::string& lib, int threads) {
  if (lib == "onednn") {
    Backend b;
    b.detail = kernels::gemm_backend_name();
    b.bind = [](const GemmProblem& p, const float* a, const float* bb, float* c) -> std::function<void()> {
      return [=] { kernels::gemm(p.trans_a, p.trans_b, p.m, p.n, p.k, 1.0f, a, p.a_cols(), bb, p.b_cols(), p.beta, c, p.n); };
    };
    return b;
  }
  if (lib == "onednn-bf16") {
    Backend b;
    b.detail = std::string(kernels::gemm_backend_name()) + ", dnnl_gemm_bf16bf16f32 (inputs pre-converted, untimed)";
    b.bind = [](const GemmProblem& p, const float* a, const float* bb, float* c) -> std::function<void()> {
      const int64_t na = p.a_rows() * p.a_cols(), nb = p.b_rows() * p.b_cols();
      auto a16 = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(na));
      auto b16 = std::make_shared<std::vector<uint16_t>>(static_cast<size_t>(nb));
      for (int64_t i = 0; i < na; ++i) (*a16)[i] = f32_to_bf16(a[i]);
      for (int64_t i = 0; i < nb; ++i) (*b16)[i] = f32_to_bf16(bb[i]);
      return [=] {
        const dnnl_status_t s = dnnl_gemm_bf16bf16f32(p.trans_a ? 'T' : 'N', p.trans_b ? 'T' : 'N', p.m, p.n, p.k,
                                                      1.0f, a16->data(), p.a_cols(), b16->data(), p.b_cols(),
                                                      p.beta, c, p.n);
        if (s != dnnl_success) throw std::runtime_error("dnnl_gemm_bf16bf16f32 failed: " + std::to_string(s));
      };
    };
    return b;
  }
  if (lib == "openblas" || lib == "openblas-unset") {
    void* h = open_library(env_or("TITAN_OPENBLAS", kOpenBlasPath));
    symbol<void (*)(int)>(h, "openblas_set_num_threads")(threads);
    const char* core = symbol<char* (*)()>(h, "openblas_get_corename")();
    const char* config = symbol<char* (*)()>(h, "openblas_get_config")();
    return cblas_backend(h, std::string(config) + ", core " + core + " (OPENBLAS_CORETYPE=" +
                                env_or("OPENBLAS_CORETYPE", "<unset>") + ", OPENBLAS_L2_SIZE=" +
                                env_or("OPENBLAS_L2_SIZE", "<unset>") + ")");
  }
  if (lib == "blis") {
    void* h = open_library(env_or("TITAN_BLIS", kBlisPath));
    symbol<void (*)(int64_t)>(h, "bli_thread_set_num_threads")(threads);
    const char* version = symbol<const char* (*)()>(h, "bli_info_get_version_str")();
    const int arch = symbol<int (*)()>(h, "bli_arch_query_id")();
    const char* arch_name = symbol<const char* (*)(int)>(h, "bli_arch_string")(arch);
    return cblas_backend(h, std::string("BLIS ") + version + " (openmp), arch " + arch_name);
  }
  if (lib == "eigen" || lib == "eigen-avx2") {
    const bool avx512 = lib == "eigen";
    if (avx512 && !cpu_features().avx512f) throw std::runtime_error("CPU has no AVX-512F");
    void* h = open_library(avx512 ? TITAN_BENCH_EIGEN_AVX512 : TITAN_BENCH_EIGEN_AVX2);
    symbol<void (*)(int)>(h, "titan_eigen_set_threads")(threads);
    using Fn = void (*)(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                        int64_t, float, float*, int64_t);
    auto sgemm = symbol<Fn>(h, "titan_eigen_sgemm");
    Backend b;
    b.detail = std::string(symbol<const char* (*)()>(h, "titan_eigen_info")()) +
               (avx512 ? ", built -mavx512f/dq/bw/vl" : ", built -mavx2 -mfma");
    b.bind = [sgemm](const GemmProblem& p, const float* a, const float* bb, float* c) -> std::function<void()> {
      return [=] { sgemm(p.trans_a, p.trans_b, p.m, p.n, p.k, 1.0f, a, p.a_cols(), bb, p.b_cols(), p.beta, c, p.n); };
    };
    return b;
  }
  throw std::runtime_error("unknown library '" + lib + "' (known: " + kAllLibs + ")");
}

int run_child(const std::string& lib, const Options& opt) {
  nlohmann::json rows = nlohmann::json::array();
  std::string detail;
  try {
    const Backend backend = make_backend(lib, opt.threads);
    detail = backend.detail;
    std::cerr << "[" << lib << "] " << detail << std::endl;
    for (const LinearShape& shape : qwen3_bench_linear_shapes()) {
      if (!opt.only.empty() && shape.layer.find(opt.only) == std::string::npos) continue;
      for (const GemmForm form : kGemmForms) {
        const GemmProblem p = gemm_problem(form, opt.tokens, shape);
        FloatBuffer a(p.a_rows() * p.a_cols()), b(p.b_rows() * p.b_cols()), c(p.m * p.n);
        const std::function<void()> fn = backend.bind(p, a.data, b.data, c.data);
        const double t0 = now_seconds();
        fn();  // warm-up
        const double first = now_seconds() - t0;
        const int repeats = static_cast<int>(std::clamp(opt.min_seconds / std::max(first, 1e-6), 3.0, 50.0));
        const Timing t = time_it(fn, 0, repeats);
        const double gflops = p.flops() / t.median_s * 1e-9;
        std::cerr << "[" << lib << "] " << shape.layer << " " << form_name(form) << ": " << fixed(gflops)
                  << " GFLOP/s" << std::endl;
        rows.push_back({{"layer", shape.layer}, {"form", form_name(form)}, {"median_s", t.median_s},
                        {"min_s", t.min_s}, {"max_s", t.max_s}, {"gflops", gflops}});
      }
    }
  } catch (const std::exception& e) {
    print_result({{"lib", lib}, {"error", e.what()}});
    return 1;
  }
  print_result({{"lib", lib}, {"detail", detail}, {"rows", rows}});
  return 0;
}

// ---- parent side: one child per library, one table ------------------------------------------

std::string self_path() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "gemm_libs_bench";
  buf[n] = '\0';
  return buf;
}

int run_parent(const Options& opt) {
  const std::vector<std::string> libs = split(opt.libs, ',');
  std::cout << "GEMM libraries at the bench-config shapes, " << opt.threads << " threads, N = " << opt.tokens
            << " tokens, each library in its own process; " << opt.runs
            << " rounds over all libraries (interleaved, so a burst of other load hits one round); cell = median\n"
            << "over rounds of GFLOP/s at each round's median time (>= 3 repeats after 1 warm-up)\n"
            << "inherited env: OPENBLAS_CORETYPE=" << env_or("OPENBLAS_CORETYPE", "<unset>")
            << " OPENBLAS_L2_SIZE=" << env_or("OPENBLAS_L2_SIZE", "<unset>") << "\n";
  const std::string t = std::to_string(opt.threads);
  std::map<std::string, nlohmann::json> rounds;  // lib -> array of child RESULTs
  std::map<std::string, std::string> details;
  for (int round = 0; round < opt.runs; ++round) {
    for (const std::string& lib : libs) {
      std::string command = "env ";
      if (lib == "openblas-unset") command += "-u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ";
      command += "OMP_NUM_THREADS=" + t + " OPENBLAS_NUM_THREADS=" + t + " BLIS_NUM_THREADS=" + t + " " +
                 shell_quote(self_path()) + " --child " + shell_quote(lib) + " --threads " + t + " --tokens " +
                 std::to_string(opt.tokens) + " --min-seconds " + std::to_string(opt.min_seconds);
      if (!opt.only.empty()) command += " --only " + shell_quote(opt.only);
      const PeerRun run = run_peer(command);
      const nlohmann::json r = run.result.is_null()
                                   ? nlohmann::json{{"lib", lib}, {"error", "no RESULT line, exit " + std::to_string(run.exit_code)}}
                                   : run.result;
      if (!rounds.count(lib)) rounds[lib] = nlohmann::json::array();
      rounds[lib].push_back(r);
      if (round == 0) {
        details[lib] = r.contains("error") ? "FAILED: " + r["error"].get<std::string>() : r["detail"].get<std::string>();
        std::cout << "  " << lib << ": " << details[lib] << "\n";
      }
    }
  }
  std::cout << "\n";

  std::vector<std::pair<std::string, int>> columns = {{"layer", -18}, {"form", -4}};
  for (const std::string& lib : libs) columns.push_back({lib, std::max<int>(8, static_cast<int>(lib.size()))});
  columns.push_back({"best fp32", -14});
  Table table(columns);
  table.print_header();
  nlohmann::json summary = nlohmann::json::array();
  for (const LinearShape& shape : qwen3_bench_linear_shapes()) {
    if (!opt.only.empty() && shape.layer.find(opt.only) == std::string::npos) continue;
    for (const GemmForm form : kGemmForms) {
      std::vector<std::string> cells = {shape.layer, form_name(form)};
      std::string best;
      double best_gflops = 0.0;
      for (const std::string& lib : libs) {
        std::vector<double> per_round;
        for (const auto& r : rounds[lib]) {
          if (!r.contains("rows")) continue;
          for (const auto& row : r["rows"]) {
            if (row["layer"] == shape.layer && row["form"] == form_name(form)) per_round.push_back(row["gflops"].get<double>());
          }
        }
        const double g = per_round.empty() ? NAN : median(per_round);
        cells.push_back(fixed(g));
        summary.push_back({{"lib", lib}, {"layer", shape.layer}, {"form", form_name(form)}, {"gflops", g},
                           {"rounds", per_round}});
        if (lib != "onednn-bf16" && !std::isnan(g) && g > best_gflops) {
          best_gflops = g;
          best = lib;
        }
      }
      cells.push_back(best);
      table.print_row(cells);
    }
  }
  print_result({{"bench", "gemm_libs_bench"}, {"threads", opt.threads}, {"tokens", opt.tokens}, {"runs", opt.runs},
                {"details", details}, {"median_gflops", summary}});
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  std::string child;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--child" && has_value) {
      child = argv[++i];
    } else if (arg == "--threads" && has_value) {
      opt.threads = std::atoi(argv[++i]);
    } else if (arg == "--tokens" && has_value) {
      opt.tokens = std::atoll(argv[++i]);
    } else if (arg == "--min-seconds" && has_value) {
      opt.min_seconds = std::atof(argv[++i]);
    } else if (arg == "--only" && has_value) {
      opt.only = argv[++i];
    } else if (arg == "--runs" && has_value) {
      opt.runs = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--libs" && has_value) {
      opt.libs = argv[++i];
    } else {
      std::cerr << "usage: gemm_libs_bench [--threads T] [--tokens N] [--min-seconds S] [--runs R] [--only LAYER] [--libs "
                << kAllLibs << "]\n";
      return 2;
    }
  }
  return child.empty() ? run_parent(opt) : run_child(child, opt);
}
