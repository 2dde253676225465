// The GEMMs of the benchmark configuration (Qwen3-0.6B widths: hidden D = 1024, 16 query heads
// x head_dim 128 = 2048, 8 kv heads x 128 = 1024, FFN F = 3072, vocab V = 151,936; N = B*T =
// 2048 tokens), one per (linear layer, form), shared by gemm_bench and gemm_libs_bench.
// Forms of y_NO = x_NI w_OI^T, all row-major (see kernels/cpu/gemm.h):
//   fwd: y  = x w^T      M = N, N = O, K = I   (A = x [N, I], B = w [O, I] transposed)
//   dX:  dx = dy w       M = N, N = I, K = O   (A = dy [N, O], B = w [O, I])
//   dW:  dw += dy^T x    M = O, N = I, K = N   (A = dy [N, O] transposed, B = x [N, I]; beta = 1)
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

namespace titan::bench {

struct LinearShape {
  std::string layer;  // "q_proj", ...
  int64_t out = 0;    // O
  int64_t in = 0;     // I
};

inline std::vector<LinearShape> qwen3_bench_linear_shapes() {
  // k/v and gate/up have the same shapes; one row stands for both.
  return {{"q_proj", 2048, 1024},       {"k_proj/v_proj", 1024, 1024}, {"o_proj", 1024, 2048},
          {"gate_proj/up_proj", 3072, 1024}, {"down_proj", 1024, 3072},   {"lm_head", 151936, 1024}};
}
constexpr int64_t kBenchTokens = 2048;

enum class GemmForm { fwd, dx, dw };
inline const char* form_name(GemmForm f) { return f == GemmForm::fwd ? "fwd" : f == GemmForm::dx ? "dX" : "dW"; }
constexpr GemmForm kGemmForms[] = {GemmForm::fwd, GemmForm::dx, GemmForm::dw};

// One row-major GEMM call: C[M, N] = alpha op(A) op(B) + beta C.
struct GemmProblem {
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  float beta = 0.0f;
  int64_t a_rows() const { return trans_a ? k : m; }
  int64_t a_cols() const { return trans_a ? m : k; }
  int64_t b_rows() const { return trans_b ? n : k; }
  int64_t b_cols() const { return trans_b ? k : n; }
  double flops() const { return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k); }
};

inline GemmProblem gemm_problem(GemmForm form, int64_t tokens, const LinearShape& s) {
  switch (form) {
    case GemmForm::fwd: return {false, true, tokens, s.out, s.in, 0.0f};
    case GemmForm::dx: return {false, false, tokens, s.in, s.out, 0.0f};
    case GemmForm::dw: return {true, false, s.out, s.in, tokens, 1.0f};
  }
  return {};
}

// 64-byte aligned float buffer filled with a cheap deterministic pattern in [-0.5, 0.5).
struct FloatBuffer {
  explicit FloatBuffer(int64_t n) : size(n) {
    const size_t bytes = (static_cast<size_t>(n) * sizeof(float) + 63) / 64 * 64;
    data = static_cast<float*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes));
    uint32_t state = 12345u + static_cast<uint32_t>(n);
    for (int64_t i = 0; i < n; ++i) {
      state = state * 1664525u + 1013904223u;
      data[i] = static_cast<float>(state >> 8) * 0x1p-24f - 0.5f;
    }
  }
  ~FloatBuffer() { std::free(data); }
  FloatBuffer(const FloatBuffer&) = delete;
  FloatBuffer& operator=(const FloatBuffer&) = delete;
  float* data = nullptr;
  int64_t size = 0;
};

}  // namespace titan::bench
