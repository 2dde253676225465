// Linear on CPU: the three products go to kernels::gemm (forward NT, dx NN, dw TN with
// beta = 1); the bias broadcast and the bias-gradient column sums are 16-lane loops here.
#include <algorithm>
#include <vector>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/gemv_bf16.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/matmul/linear.h"

namespace titan::ops {

using namespace titan::kernels;

// y[r, :] = b for rows [begin, end); the GEMM then adds x w^T with beta = 1.
TITAN_SIMD_KERNEL(static void, broadcast_rows,
                  (int64_t begin, int64_t end, int64_t out, const float* b, float* y),
                  (begin, end, out, b, y)) {
  for (int64_t r = begin; r < end; ++r) {
    float* yr = y + r * out;
    int64_t j = 0;
    for (; j + kLanes <= out; j += kLanes) store16(yr + j, load16<f32x16>(b + j));
    for (; j < out; ++j) yr[j] = b[j];
  }
}

// db[j] += sum_r dy[r, j] for columns [begin, end): each column is summed in row order, so the
// result does not depend on the thread count.
TITAN_SIMD_KERNEL(static void, column_sums,
                  (int64_t begin, int64_t end, int64_t n, int64_t out, const float* dy, float* db),
                  (begin, end, n, out, dy, db)) {
  const int64_t width = end - begin;
  std::vector<float> acc(static_cast<size_t>(width), 0.0f);
  for (int64_t r = 0; r < n; ++r) {
    const float* row = dy + r * out + begin;
    int64_t j = 0;
    for (; j + kLanes <= width; j += kLanes) store16(&acc[j], load16<f32x16>(&acc[j]) + load16<f32x16>(row + j));
    for (; j < width; ++j) acc[j] += row[j];
  }
  for (int64_t j = 0; j < width; ++j) db[begin + j] += acc[j];
}

// Under bf16 compute with the f32 master (bf16 x, f32 w), the weight as the products take it: w
// itself where titan's kernels round it while packing (gemm_bf16_round_b; bit for bit the products
// on w rounded first: AMX, AVX-512-BF16, and the AVX2 emulation), else a bf16 copy (oneDNN, and
// decode's GEMV).
static Tensor weight_operand(const Tensor& x, const Tensor& w, bool gemv) {
  const bool round_in_gemm = gemm_bf16_rounds_b_while_packing() && !gemv;
  return x.dtype() == DType::bf16 && w.dtype() == DType::f32 && !round_in_gemm ? cast_to(w, DType::bf16) : w;
}

// C = op(A) op(B) (+ beta C) on the operands' dtypes (kernels::gemm_of).
static void product(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const Tensor& a, int64_t lda,
                    const Tensor& b, int64_t ldb, float beta, float* c, int64_t ldc) {
  gemm_of(a.dtype(), b.dtype(), trans_a, trans_b, m, n, k, 1.0f, a.raw_data(), lda, b.raw_data(), ldb, beta, c, ldc);
}

static void forward_cpu(const Tensor& x, const Tensor& w_OI, const Tensor& b, Tensor& y) {
  const int64_t in = w_OI.size(1), out = w_OI.size(0), n = x.numel() / in;
  float* yp = y.data<float>();
  float beta = 0.0f;
  if (b.defined()) {
    const float* bp = b.data<float>();
    parallel_for(n, 64, [&](int64_t rb, int64_t re) { broadcast_rows(rb, re, out, bp, yp); });
    beta = 1.0f;
  }
  // y_NO = x_NI w_OI^T: M = N, N = O, K = I. A few rows on bf16 (decode) stream w through the
  // GEMV kernel; everything else is a GEMM.
  const bool gemv = x.dtype() == DType::bf16 && n <= kGemvMaxRows && gemv_bf16_supported();
  const Tensor w = weight_operand(x, w_OI, gemv);
  if (gemv) {
    gemv_bf16(n, out, in, x.data<uint16_t>(), w.data<uint16_t>(), beta != 0.0f, yp);
  } else {
    product(false, true, n, out, in, x, in, w, in, beta, yp, out);
  }
}

// dx_NI = dy_NO w_OI (M = N, N = I, K = O; written) and dw_OI += dy_NO^T x_NI (M = O, N = I,
// K = N), in f32 or, with bf16 x, on bf16 operands (dy rounded to bf16 once).
static void backward_products(const Tensor& dy, const Tensor& x, const Tensor& w_OI, Tensor& dx, Tensor& dw) {
  const int64_t in = w_OI.size(1), out = w_OI.size(0), n = x.numel() / in;
  const Tensor dy_op = x.dtype() == DType::bf16 ? cast_to(dy, DType::bf16) : dy;
  if (dx.defined()) {
    if (out == 0) {
      dx.zero_();
    } else {
      product(false, false, n, in, out, dy_op, out, weight_operand(x, w_OI, false), in, 0.0f, dx.data<float>(), in);
    }
  }
  if (dw.defined() && n > 0) product(true, false, out, in, n, dy_op, out, x, in, 1.0f, dw.data<float>(), in);
}

static void backward_cpu(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                         Tensor& db) {
  const int64_t in = w.size(1), out = w.size(0), n = x.numel() / in;
  backward_products(dy, x, w, dx, dw);
  if (db.defined() && n > 0) {
    const float* dyp = dy.data<float>();
    float* dbp = db.data<float>();
    // Column blocks of whole vectors; each thread owns its columns (no reduction across threads).
    const int64_t num_blocks = (out + kLanes - 1) / kLanes;
    parallel_for(num_blocks, 4, [&](int64_t bb, int64_t be) {
      column_sums(bb * kLanes, std::min(out, be * kLanes), n, out, dyp, dbp);
    });
  }
}

LinearImpl linear_impl_cpu() { return {"linear_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu}; }

}  // namespace titan::ops
