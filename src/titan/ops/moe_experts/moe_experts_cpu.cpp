// MoE experts on CPU: one grouped GEMM per projection over all experts (tiles of every expert's
// contiguous dispatch rows handed to threads dynamically, each tile one kernels::gemm call);
// SwiGLU through the swiglu op's CPU kernel. Backward mirrors it (moe_experts.md). bf16 operands
// take the same GEMMs on kernels::gemm_bf16, with the contract's roundings (moe_experts.h) done by
// the cast op's kernel into bf16 buffers. Every output
// element is produced by one GEMM over a tile whose shape depends only on the layout, never on
// the thread count, and nothing is accumulated atomically: results are bitwise reproducible.
// Shape legend: P dispatch rows, D model width, E experts, F expert intermediate width.
#include <algorithm>
#include <vector>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/moe_experts/moe_experts.h"
#include "titan/ops/swiglu/swiglu.h"

namespace titan::ops {

using kernels::gemm;

namespace {

// Output tiles of the grouped GEMMs: big enough that a gemm call amortises its setup and packing,
// small enough that uneven experts still spread over the threads. Weight-gradient tiles are larger:
// their K is only the expert's row count, so a small tile spends its time on packing and on C.
// Measured at the reduced 30B-A3B shapes (bench/moe_bench, docs/performance.md): 128 x 256 for
// both gave 54% of the dense GEMMs' GFLOP/s, 256 x 256 with 1024 x 1024 weight tiles 70%.
constexpr int64_t kTileRows = 256;
constexpr int64_t kTileCols = 256;
constexpr int64_t kWeightTileRows = 1024;
constexpr int64_t kWeightTileCols = 1024;
// Rows per thread chunk at least in the per-row loop.
constexpr int64_t kRowGrain = 16;

struct Tile {
  int64_t expert, r0, rows, c0, cols;
};

// Tiles of an [rows x cols] output per expert. by_dispatch_rows: the output rows are the
// expert's dispatch rows [offsets[e], offsets[e+1]) (activations); otherwise every expert with
// rows owns a [rows x cols] weight-gradient block, rows counted from 0.
std::vector<Tile> make_tiles(const int64_t* offsets, int64_t num_experts, bool by_dispatch_rows,
                             int64_t rows, int64_t cols) {
  std::vector<Tile> tiles;
  for (int64_t e = 0; e < num_experts; ++e) {
    const int64_t count = offsets[e + 1] - offsets[e];
    if (count == 0) continue;
    const int64_t r_begin = by_dispatch_rows ? offsets[e] : 0;
    const int64_t r_end = by_dispatch_rows ? offsets[e + 1] : rows;
    const int64_t tile_rows = by_dispatch_rows ? kTileRows : kWeightTileRows;
    const int64_t tile_cols = by_dispatch_rows ? kTileCols : kWeightTileCols;
    for (int64_t r = r_begin; r < r_end; r += tile_rows) {
      for (int64_t c = 0; c < cols; c += tile_cols) {
        tiles.push_back({e, r, std::min(tile_rows, r_end - r), c, std::min(tile_cols, cols - c)});
      }
    }
  }
  return tiles;
}

template <class Fn>
void for_each_tile(const std::vector<Tile>& tiles, Fn&& fn) {
  parallel_for_each_dynamic(static_cast<int64_t>(tiles.size()),
                            [&](int64_t i) { fn(tiles[static_cast<size_t>(i)]); });
}

// Grouped activation GEMM: C[rows_e, n] (=, or += when beta = 1) A[rows_e, k] op(B_e) for every
// expert e, where A and C hold all experts' rows in dispatch order and B_e = b + e * b_stride is
// [n, k] (trans_b) or [k, n]. T: float, or uint16_t holding bf16 (kernels::gemm's overloads).
template <class T>
void grouped_gemm_rows(const int64_t* offsets, int64_t num_experts, bool trans_b, int64_t n,
                       int64_t k, const T* a, const T* b, int64_t b_stride, float beta,
                       float* c) {
  const auto tiles = make_tiles(offsets, num_experts, true, 0, n);
  for_each_tile(tiles, [&](const Tile& t) {
    const T* b_e = b + t.expert * b_stride;
    const T* b_tile = trans_b ? b_e + t.c0 * k : b_e + t.c0;
    gemm(false, trans_b, t.rows, t.cols, k, 1.0f, a + t.r0 * k, k, b_tile, trans_b ? k : n, beta,
         c + t.r0 * n + t.c0, n);
  });
}

// Grouped weight gradient: dW_e[m, n] += A_e^T B_e over the expert's dispatch rows, A [P, m],
// B [P, n]; dW_e = dw + e * m * n.
template <class T>
void grouped_gemm_weight_grad(const int64_t* offsets, int64_t num_experts, int64_t m, int64_t n,
                              const T* a, const T* b, float* dw) {
  const auto tiles = make_tiles(offsets, num_experts, false, m, n);
  for_each_tile(tiles, [&](const Tile& t) {
    const int64_t r0 = offsets[t.expert], count = offsets[t.expert + 1] - r0;
    gemm(true, false, t.rows, t.cols, count, 1.0f, a + r0 * m + t.r0, m, b + r0 * n + t.c0, n,
         1.0f, dw + t.expert * m * n + t.r0 * n + t.c0, n);
  });
}

// The routing weights folded into backward (moe_experts.md), per row r of pair q:
// dweight[q] = dh'[r] . h[r] (= dy . y, with dh' = dy w2 unweighted), then dh' and h are scaled
// by weight[q] in place (dh for SwiGLU's backward, w h for dw2).
void apply_row_weights(int64_t p, int64_t f, const float* weight, const int32_t* pair_of_row,
                       float* dhp, float* hp, float* dweight) {
  parallel_for(p, kRowGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int32_t q = pair_of_row[r];
      const float w = weight[q];
      float* dhr = dhp + r * f;
      float* hr = hp + r * f;
      double acc = 0.0;
      for (int64_t o = 0; o < f; ++o) acc += static_cast<double>(dhr[o]) * hr[o];
      dweight[q] = static_cast<float>(acc);
      for (int64_t o = 0; o < f; ++o) {
        dhr[o] *= w;
        hr[o] *= w;
      }
    }
  });
}

}  // namespace

// A [P, F] f32 buffer on x's device: the saved gate and up, and the kernels' scratch (forward: h;
// backward: dh, h, dup; with bf16 operands also their bf16 roundings, operand() below). The CPU kernel's memory and, shapes only, the meta device's
// (moe_experts_impl_meta).
static Tensor rows_PF(const Tensor& x, const Tensor& w1) {
  return Tensor::empty({x.size(0), w1.size(1)}, DType::f32, x.device());
}

// The operand a product reads: `t` itself, or with bf16 operands its rounding into a new bf16 buffer.
static Tensor operand(const Tensor& t, bool bf16) {
  if (!bf16) return t;
  Tensor out = Tensor::empty(t.shape(), DType::bf16, t.device());
  if (!t.is_meta()) cast(t, out);
  return out;
}

// The grouped GEMMs on f32 or bf16 operands (a and b of one dtype).
static void rows_product(const int64_t* offsets, int64_t e, bool trans_b, int64_t n, int64_t k, const Tensor& a,
                         const Tensor& b, float beta, Tensor& c) {
  if (a.dtype() == DType::bf16) {
    grouped_gemm_rows(offsets, e, trans_b, n, k, a.data<uint16_t>(), b.data<uint16_t>(), n * k, beta, c.data<float>());
  } else {
    grouped_gemm_rows(offsets, e, trans_b, n, k, a.data<float>(), b.data<float>(), n * k, beta, c.data<float>());
  }
}
static void weight_grad_product(const int64_t* offsets, int64_t e, int64_t m, int64_t n, const Tensor& a,
                                const Tensor& b, Tensor& dw) {
  if (a.dtype() == DType::bf16) {
    grouped_gemm_weight_grad(offsets, e, m, n, a.data<uint16_t>(), b.data<uint16_t>(), dw.data<float>());
  } else {
    grouped_gemm_weight_grad(offsets, e, m, n, a.data<float>(), b.data<float>(), dw.data<float>());
  }
}

static void forward_cpu(const Tensor& x, const Tensor& offsets_t, const Tensor& w1,
                        const Tensor& w3, const Tensor& w2, Tensor& y, MoeExpertsSaved& saved) {
  const int64_t p = x.size(0), d = x.size(1), e = w1.size(0), f = w1.size(1);
  saved.gate_PF = rows_PF(x, w1);
  saved.up_PF = rows_PF(x, w1);
  if (p == 0) return;
  const bool bf16 = x.dtype() == DType::bf16;
  const int64_t* offsets = offsets_t.data<int64_t>();
  // gate = x w1^T, up = x w3^T, h = silu(gate) * up, y = h w2^T (grouped; h rounded to bf16 for
  // bf16 operands).
  Tensor h = rows_PF(x, w1);
  rows_product(offsets, e, true, f, d, x, w1, 0.0f, saved.gate_PF);
  rows_product(offsets, e, true, f, d, x, w3, 0.0f, saved.up_PF);
  swiglu_impl_cpu().forward(saved.gate_PF, saved.up_PF, h);
  rows_product(offsets, e, true, d, f, operand(h, bf16), w2, 0.0f, y);
}

// h rounded to bf16 and widened back, in place: the values forward's down product multiplied.
static void round_to_bf16(Tensor& h) {
  float* hp = h.data<float>();
  parallel_for(h.numel(), 4096, [&](int64_t b, int64_t en) {
    for (int64_t i = b; i < en; ++i) hp[i] = bf16_to_f32(f32_to_bf16(hp[i]));
  });
}

static void backward_cpu(const Tensor& dy, const Tensor& weight, const Tensor& pair_of_row,
                         const Tensor& x, const Tensor& offsets_t, const Tensor& w1,
                         const Tensor& w3, const Tensor& w2, const MoeExpertsSaved& saved,
                         Tensor& dx, Tensor& dw1, Tensor& dw3, Tensor& dw2, Tensor& dweight) {
  const int64_t p = x.size(0), d = x.size(1), e = w1.size(0), f = w1.size(1);
  if (p == 0) return;
  const bool bf16 = x.dtype() == DType::bf16;
  const int64_t* offsets = offsets_t.data<int64_t>();
  // dh'_PF = dy w2 (unweighted), h = swiglu(gate, up) recomputed (for bf16 operands: dy rounded
  // before its products, h to what forward multiplied).
  const Tensor dy_op = operand(dy, bf16);
  Tensor dh = rows_PF(x, w1), h = rows_PF(x, w1);
  rows_product(offsets, e, false, f, d, dy_op, w2, 0.0f, dh);
  swiglu_impl_cpu().forward(saved.gate_PF, saved.up_PF, h);
  if (bf16) round_to_bf16(h);
  if (weight.defined()) {
    apply_row_weights(p, f, weight.data<float>(), pair_of_row.data<int32_t>(), dh.data<float>(),
                      h.data<float>(), dweight.data<float>());
  }
  weight_grad_product(offsets, e, d, f, dy_op, operand(h, bf16), dw2);

  // SwiGLU backward (dgate into h's buffer, free now), then dw1, dw3 and dx.
  Tensor& dgate = h;
  Tensor dup = rows_PF(x, w1);
  swiglu_impl_cpu().backward(dh, saved.gate_PF, saved.up_PF, dgate, dup);
  const Tensor dgate_op = operand(dgate, bf16), dup_op = operand(dup, bf16);
  weight_grad_product(offsets, e, f, d, dgate_op, x, dw1);
  weight_grad_product(offsets, e, f, d, dup_op, x, dw3);
  // dx = dgate w1 + dup w3: [P, F] x [F, D] per expert.
  rows_product(offsets, e, false, d, f, dgate_op, w1, 0.0f, dx);
  rows_product(offsets, e, false, d, f, dup_op, w3, 1.0f, dx);
}

MoeExpertsImpl moe_experts_impl_cpu() {
  return {"moe_experts_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu};
}

MoeExpertsImpl moe_experts_impl_meta() {
  const auto forward = [](const Tensor& x, const Tensor&, const Tensor& w1, const Tensor&, const Tensor&, Tensor&,
                          MoeExpertsSaved& saved) {
    saved.gate_PF = rows_PF(x, w1);
    saved.up_PF = rows_PF(x, w1);
    const Tensor h = rows_PF(x, w1);
    (void)operand(h, x.dtype() == DType::bf16);
  };
  const auto backward = [](const Tensor& dy, const Tensor&, const Tensor&, const Tensor& x, const Tensor&,
                           const Tensor& w1, const Tensor&, const Tensor&, const MoeExpertsSaved&, Tensor&, Tensor&,
                           Tensor&, Tensor&, Tensor&) {
    const bool bf16 = x.dtype() == DType::bf16;
    const Tensor dy_op = operand(dy, bf16), dh = rows_PF(x, w1), h = rows_PF(x, w1);
    (void)operand(h, bf16);  // dw2's operand, freed before SwiGLU's backward
    const Tensor dup = rows_PF(x, w1);
    const Tensor dgate_op = operand(h, bf16), dup_op = operand(dup, bf16);  // live together at the end
  };
  return {"moe_experts_meta", Device::meta, nullptr, forward, backward};
}

}  // namespace titan::ops
