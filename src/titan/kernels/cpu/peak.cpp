#include "titan/kernels/cpu/peak.h"

#include <immintrin.h>
#include <omp.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "titan/core/cpu_features.h"
#include "titan/core/dtype.h"
#include "titan/core/error.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/gemm_bf16_amx.h"

namespace titan::kernels {

static double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Each kernel returns a value derived from every accumulator so nothing is optimized away.
// acc = acc * a + b with a slightly below 1 converges (no overflow, no denormals).

// Sum of the 16 lanes through memory (_mm512_reduce_add_ps trips a GCC 12 -Wuninitialized
// false positive inside its own header).
__attribute__((target("avx512f"))) static float sum_lanes(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  float total = 0.0f;
  for (const float x : lanes) total += x;
  return total;
}

__attribute__((target("avx512f"))) static float fp32_avx512_loop(int64_t iters, float seed) {
  const __m512 a = _mm512_set1_ps(0.99999f), b = _mm512_set1_ps(1e-5f * seed);
  __m512 c0 = _mm512_set1_ps(seed), c1 = _mm512_set1_ps(seed + 1), c2 = _mm512_set1_ps(seed + 2),
         c3 = _mm512_set1_ps(seed + 3), c4 = _mm512_set1_ps(seed + 4), c5 = _mm512_set1_ps(seed + 5),
         c6 = _mm512_set1_ps(seed + 6), c7 = _mm512_set1_ps(seed + 7), c8 = _mm512_set1_ps(seed + 8),
         c9 = _mm512_set1_ps(seed + 9), c10 = _mm512_set1_ps(seed + 10), c11 = _mm512_set1_ps(seed + 11),
         c12 = _mm512_set1_ps(seed + 12), c13 = _mm512_set1_ps(seed + 13), c14 = _mm512_set1_ps(seed + 14),
         c15 = _mm512_set1_ps(seed + 15);
  for (int64_t i = 0; i < iters; ++i) {
    c0 = _mm512_fmadd_ps(c0, a, b);
    c1 = _mm512_fmadd_ps(c1, a, b);
    c2 = _mm512_fmadd_ps(c2, a, b);
    c3 = _mm512_fmadd_ps(c3, a, b);
    c4 = _mm512_fmadd_ps(c4, a, b);
    c5 = _mm512_fmadd_ps(c5, a, b);
    c6 = _mm512_fmadd_ps(c6, a, b);
    c7 = _mm512_fmadd_ps(c7, a, b);
    c8 = _mm512_fmadd_ps(c8, a, b);
    c9 = _mm512_fmadd_ps(c9, a, b);
    c10 = _mm512_fmadd_ps(c10, a, b);
    c11 = _mm512_fmadd_ps(c11, a, b);
    c12 = _mm512_fmadd_ps(c12, a, b);
    c13 = _mm512_fmadd_ps(c13, a, b);
    c14 = _mm512_fmadd_ps(c14, a, b);
    c15 = _mm512_fmadd_ps(c15, a, b);
  }
  const __m512 s = _mm512_add_ps(
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                    _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7))),
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                    _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15))));
  return sum_lanes(s);
}

__attribute__((target("avx2,fma"))) static float fp32_avx2_loop(int64_t iters, float seed) {
  const __m256 a = _mm256_set1_ps(0.99999f), b = _mm256_set1_ps(1e-5f * seed);
  __m256 c0 = _mm256_set1_ps(seed), c1 = _mm256_set1_ps(seed + 1), c2 = _mm256_set1_ps(seed + 2),
         c3 = _mm256_set1_ps(seed + 3), c4 = _mm256_set1_ps(seed + 4), c5 = _mm256_set1_ps(seed + 5),
         c6 = _mm256_set1_ps(seed + 6), c7 = _mm256_set1_ps(seed + 7), c8 = _mm256_set1_ps(seed + 8),
         c9 = _mm256_set1_ps(seed + 9), c10 = _mm256_set1_ps(seed + 10), c11 = _mm256_set1_ps(seed + 11);
  for (int64_t i = 0; i < iters; ++i) {
    c0 = _mm256_fmadd_ps(c0, a, b);
    c1 = _mm256_fmadd_ps(c1, a, b);
    c2 = _mm256_fmadd_ps(c2, a, b);
    c3 = _mm256_fmadd_ps(c3, a, b);
    c4 = _mm256_fmadd_ps(c4, a, b);
    c5 = _mm256_fmadd_ps(c5, a, b);
    c6 = _mm256_fmadd_ps(c6, a, b);
    c7 = _mm256_fmadd_ps(c7, a, b);
    c8 = _mm256_fmadd_ps(c8, a, b);
    c9 = _mm256_fmadd_ps(c9, a, b);
    c10 = _mm256_fmadd_ps(c10, a, b);
    c11 = _mm256_fmadd_ps(c11, a, b);
  }
  const __m256 s = _mm256_add_ps(
      _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                    _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7))),
      _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  float total = 0.0f;
  for (const float v : lanes) total += v;
  return total;
}

// Each _mm512_dpbf16_ps: 16 fp32 lanes += 2 bf16 products each = 32 multiplies + 32 adds.
__attribute__((target("avx512bf16,avx512f"))) static float bf16_avx512_loop(int64_t iters, float seed) {
  const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f), _mm512_set1_ps(2e-3f));
  const __m512bh b = _mm512_cvtne2ps_pbh(_mm512_set1_ps(1e-3f * seed), _mm512_set1_ps(1e-3f));
  __m512 c0 = _mm512_set1_ps(seed), c1 = _mm512_set1_ps(seed + 1), c2 = _mm512_set1_ps(seed + 2),
         c3 = _mm512_set1_ps(seed + 3), c4 = _mm512_set1_ps(seed + 4), c5 = _mm512_set1_ps(seed + 5),
         c6 = _mm512_set1_ps(seed + 6), c7 = _mm512_set1_ps(seed + 7), c8 = _mm512_set1_ps(seed + 8),
         c9 = _mm512_set1_ps(seed + 9), c10 = _mm512_set1_ps(seed + 10), c11 = _mm512_set1_ps(seed + 11),
         c12 = _mm512_set1_ps(seed + 12), c13 = _mm512_set1_ps(seed + 13), c14 = _mm512_set1_ps(seed + 14),
         c15 = _mm512_set1_ps(seed + 15);
  for (int64_t i = 0; i < iters; ++i) {
    c0 = _mm512_dpbf16_ps(c0, a, b);
    c1 = _mm512_dpbf16_ps(c1, a, b);
    c2 = _mm512_dpbf16_ps(c2, a, b);
    c3 = _mm512_dpbf16_ps(c3, a, b);
    c4 = _mm512_dpbf16_ps(c4, a, b);
    c5 = _mm512_dpbf16_ps(c5, a, b);
    c6 = _mm512_dpbf16_ps(c6, a, b);
    c7 = _mm512_dpbf16_ps(c7, a, b);
    c8 = _mm512_dpbf16_ps(c8, a, b);
    c9 = _mm512_dpbf16_ps(c9, a, b);
    c10 = _mm512_dpbf16_ps(c10, a, b);
    c11 = _mm512_dpbf16_ps(c11, a, b);
    c12 = _mm512_dpbf16_ps(c12, a, b);
    c13 = _mm512_dpbf16_ps(c13, a, b);
    c14 = _mm512_dpbf16_ps(c14, a, b);
    c15 = _mm512_dpbf16_ps(c15, a, b);
  }
  const __m512 s = _mm512_add_ps(
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3)),
                    _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7))),
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11)),
                    _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15))));
  return sum_lanes(s);
}

// Each _tile_dpbf16ps: a 16 x 16 f32 tile += [16 x 32] x [32 x 16] bf16 products = 16,384 FLOPs; four
// independent accumulator tiles (0-3) from two A (4, 5) and two B (6, 7) tiles, as a 2 x 2 GEMM
// block does.
__attribute__((target("amx-tile,amx-bf16"))) static float bf16_amx_loop(int64_t iters, float seed) {
  amx_load_tile_config();
  alignas(64) uint16_t operand[16 * 32];
  for (int i = 0; i < 16 * 32; ++i) operand[i] = f32_to_bf16(1e-3f * seed);
  _tile_loadd(4, operand, 64);
  _tile_loadd(5, operand, 64);
  _tile_loadd(6, operand, 64);
  _tile_loadd(7, operand, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t i = 0; i < iters; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  alignas(64) float out[4][16 * 16];
  _tile_stored(0, out[0], 64);
  _tile_stored(1, out[1], 64);
  _tile_stored(2, out[2], 64);
  _tile_stored(3, out[3], 64);
  _tile_release();
  float total = 0.0f;
  for (const auto& tile : out) total += tile[0] + tile[255];
  return total;
}

const char* peak_kernel_name(PeakKernel kernel) {
  switch (kernel) {
    case PeakKernel::fp32_avx512: return "fp32 FMA AVX-512 (_mm512_fmadd_ps)";
    case PeakKernel::fp32_avx2: return "fp32 FMA AVX2 (_mm256_fmadd_ps)";
    case PeakKernel::bf16_avx512: return "bf16 dot AVX-512 (_mm512_dpbf16_ps)";
    case PeakKernel::bf16_amx: return "bf16 AMX tiles (_tile_dpbf16ps)";
  }
  return "?";
}

bool peak_kernel_supported(PeakKernel kernel) {
  const CpuFeatures& f = cpu_features();
  switch (kernel) {
    case PeakKernel::fp32_avx512: return f.avx512f;
    case PeakKernel::fp32_avx2: return f.avx2 && f.fma;
    case PeakKernel::bf16_avx512: return f.avx512f && f.avx512_bf16;
    case PeakKernel::bf16_amx: return f.amx_bf16 && amx_tiles_permitted();
  }
  return false;
}

PeakKernel best_fp32_kernel() {
  return peak_kernel_supported(PeakKernel::fp32_avx512) ? PeakKernel::fp32_avx512 : PeakKernel::fp32_avx2;
}

// FLOPs of one loop iteration, and the loop itself.
static double flops_per_iter(PeakKernel kernel) {
  switch (kernel) {
    case PeakKernel::fp32_avx512: return 16.0 * 16 * 2;
    case PeakKernel::fp32_avx2: return 12.0 * 8 * 2;
    case PeakKernel::bf16_avx512: return 16.0 * 32 * 2;
    case PeakKernel::bf16_amx: return 4.0 * 16 * 16 * 32 * 2;
  }
  return 0.0;
}

static float run_loop(PeakKernel kernel, int64_t iters, float seed) {
  switch (kernel) {
    case PeakKernel::fp32_avx512: return fp32_avx512_loop(iters, seed);
    case PeakKernel::fp32_avx2: return fp32_avx2_loop(iters, seed);
    case PeakKernel::bf16_avx512: return bf16_avx512_loop(iters, seed);
    case PeakKernel::bf16_amx: return bf16_amx_loop(iters, seed);
  }
  return 0.0f;
}

static std::atomic<float> g_sink{0.0f};

static double process_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Calibrates run(iters) to about `seconds_per_repeat` (which also warms up clocks and threads),
// runs it once more as a warm-up, then times `repeats` runs. Returns the measurement for
// `flops_per_iter` FLOPs per iteration. The CPU share is of the whole process (oneDNN's threads
// are not ours to clock one by one); another process on our cores lowers it.
template <class Run>
static PeakMeasurement time_repeats(const Run& run, double flops_per_iter, int threads, double seconds_per_repeat,
                                    int repeats) {
  int64_t iters = 1;
  for (;;) {
    const double t0 = seconds_now();
    run(iters);
    const double dt = seconds_now() - t0;
    if (dt >= 0.05 || dt >= seconds_per_repeat) {
      iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * seconds_per_repeat / dt));
      break;
    }
    iters *= 4;
  }
  run(iters);
  std::vector<double> seconds;
  const double cpu0 = process_cpu_seconds(), wall0 = seconds_now();
  for (int r = 0; r < std::max(1, repeats); ++r) {
    const double t0 = seconds_now();
    run(iters);
    seconds.push_back(seconds_now() - t0);
  }
  const double cpu_share = (process_cpu_seconds() - cpu0) / (threads * (seconds_now() - wall0));
  std::sort(seconds.begin(), seconds.end());
  const double flops = flops_per_iter * static_cast<double>(iters);
  return {flops / seconds[seconds.size() / 2] * 1e-9, flops / seconds.front() * 1e-9, cpu_share};
}

PeakMeasurement measure_peak(PeakKernel kernel, int threads, double seconds_per_repeat, int repeats) {
  TITAN_CHECK(peak_kernel_supported(kernel), "[peak_flops] ", peak_kernel_name(kernel),
              ": this CPU lacks the instruction set (", cpu_path_name(), ")");
  threads = std::max(1, threads);
  const auto run = [&](int64_t iters) {
    iters *= 1 << 12;  // one calibration unit: ~0.1-1 ms
#pragma omp parallel num_threads(threads)
    {
      const float r = run_loop(kernel, iters, 1.0f + static_cast<float>(omp_get_thread_num()));
      g_sink.store(r, std::memory_order_relaxed);
    }
  };
  return time_repeats(run, flops_per_iter(kernel) * (1 << 12) * threads, threads, seconds_per_repeat, repeats);
}

PeakMeasurement measure_gemm_bf16_peak(int threads, double seconds_per_repeat, int repeats, int64_t n) {
  threads = std::max(1, threads);
  // oneDNN sizes its thread team from the calling thread's OpenMP setting.
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(threads);
  // 2^-7 everywhere: exact in bf16, sums of n products stay far from overflow and denormals.
  const std::vector<uint16_t> a(static_cast<size_t>(n * n), f32_to_bf16(0.0078125f)), b = a;
  std::vector<float> c(static_cast<size_t>(n * n));
  const auto run = [&](int64_t iters) {
    for (int64_t i = 0; i < iters; ++i) {
      gemm_bf16(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    }
    g_sink.store(c[static_cast<size_t>(n + 1)], std::memory_order_relaxed);
  };
  const PeakMeasurement m = time_repeats(run, 2.0 * static_cast<double>(n) * static_cast<double>(n) *
                                                  static_cast<double>(n), threads, seconds_per_repeat, repeats);
  omp_set_num_threads(saved_threads);
  return m;
}

}  // namespace titan::kernels
