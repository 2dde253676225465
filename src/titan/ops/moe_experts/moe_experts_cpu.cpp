// MoE experts on CPU: one grouped GEMM per projection over all experts (tiles of every expert's
// contiguous dispatch rows handed to threads dynamically, each tile one kernels::gemm call);
// SwiGLU through the swiglu op's CPU kernel. Backward mirrors it (moe_experts.md). Every output
// element is produced by one GEMM over a tile whose shape depends only on the layout, never on
// the thread count, and nothing is accumulated atomically: results are bitwise reproducible.
// Shape legend: P dispatch rows, D model width, E experts, F expert intermediate width.
#include <algorithm>
#include <vector>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm.h"
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
// [n, k] (trans_b) or [k, n].
void grouped_gemm_rows(const int64_t* offsets, int64_t num_experts, bool trans_b, int64_t n,
                       int64_t k, const float* a, const float* b, int64_t b_stride, float beta,
                       float* c) {
  const auto tiles = make_tiles(offsets, num_experts, true, 0, n);
  for_each_tile(tiles, [&](const Tile& t) {
    const float* b_e = b + t.expert * b_stride;
    const float* b_tile = trans_b ? b_e + t.c0 * k : b_e + t.c0;
    gemm(false, trans_b, t.rows, t.cols, k, 1.0f, a + t.r0 * k, k, b_tile, trans_b ? k : n, beta,
         c + t.r0 * n + t.c0, n);
  });
}

// Grouped weight gradient: dW_e[m, n] += A_e^T B_e over the expert's dispatch rows, A [P, m],
// B [P, n]; dW_e = dw + e * m * n.
void grouped_gemm_weight_grad(const int64_t* offsets, int64_t num_experts, int64_t m, int64_t n,
                              const float* a, const float* b, float* dw) {
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

// A [P, F] buffer on x's device: the saved gate and up, and the kernels' scratch (forward: h;
// backward: dh, h, dup). The CPU kernel's memory and, shapes only, the meta device's
// (moe_experts_impl_meta).
static Tensor rows_PF(const Tensor& x, const Tensor& w1) {
  return Tensor::empty({x.size(0), w1.size(1)}, DType::f32, x.device());
}

static void forward_cpu(const Tensor& x, const Tensor& offsets_t, const Tensor& w1,
                        const Tensor& w3, const Tensor& w2, Tensor& y, MoeExpertsSaved& saved) {
  const int64_t p = x.size(0), d = x.size(1), e = w1.size(0), f = w1.size(1);
  saved.gate_PF = rows_PF(x, w1);
  saved.up_PF = rows_PF(x, w1);
  if (p == 0) return;
  const int64_t* offsets = offsets_t.data<int64_t>();
  // gate = x w1^T, up = x w3^T, h = silu(gate) * up, y = h w2^T (grouped).
  Tensor h = rows_PF(x, w1);
  grouped_gemm_rows(offsets, e, true, f, d, x.data<float>(), w1.data<float>(), f * d, 0.0f,
                    saved.gate_PF.data<float>());
  grouped_gemm_rows(offsets, e, true, f, d, x.data<float>(), w3.data<float>(), f * d, 0.0f,
                    saved.up_PF.data<float>());
  swiglu_impl_cpu().forward(saved.gate_PF, saved.up_PF, h);
  grouped_gemm_rows(offsets, e, true, d, f, h.data<float>(), w2.data<float>(), d * f, 0.0f,
                    y.data<float>());
}

static void backward_cpu(const Tensor& dy, const Tensor& weight, const Tensor& pair_of_row,
                         const Tensor& x, const Tensor& offsets_t, const Tensor& w1,
                         const Tensor& w3, const Tensor& w2, const MoeExpertsSaved& saved,
                         Tensor& dx, Tensor& dw1, Tensor& dw3, Tensor& dw2, Tensor& dweight) {
  const int64_t p = x.size(0), d = x.size(1), e = w1.size(0), f = w1.size(1);
  if (p == 0) return;
  const int64_t* offsets = offsets_t.data<int64_t>();
  // dh'_PF = dy w2 (unweighted), h = swiglu(gate, up) recomputed.
  Tensor dh = rows_PF(x, w1), h = rows_PF(x, w1);
  grouped_gemm_rows(offsets, e, false, f, d, dy.data<float>(), w2.data<float>(), d * f, 0.0f,
                    dh.data<float>());
  swiglu_impl_cpu().forward(saved.gate_PF, saved.up_PF, h);
  float* hp = h.data<float>();
  if (weight.defined()) {
    apply_row_weights(p, f, weight.data<float>(), pair_of_row.data<int32_t>(), dh.data<float>(),
                      hp, dweight.data<float>());
  }
  grouped_gemm_weight_grad(offsets, e, d, f, dy.data<float>(), hp, dw2.data<float>());

  // SwiGLU backward (dgate into h's buffer, free now), then dw1, dw3 and dx.
  Tensor& dgate = h;
  Tensor dup = rows_PF(x, w1);
  swiglu_impl_cpu().backward(dh, saved.gate_PF, saved.up_PF, dgate, dup);
  grouped_gemm_weight_grad(offsets, e, f, d, dgate.data<float>(), x.data<float>(),
                           dw1.data<float>());
  grouped_gemm_weight_grad(offsets, e, f, d, dup.data<float>(), x.data<float>(),
                           dw3.data<float>());
  grouped_gemm_rows(offsets, e, false, d, f, dgate.data<float>(), w1.data<float>(), f * d, 0.0f,
                    dx.data<float>());
  grouped_gemm_rows(offsets, e, false, d, f, dup.data<float>(), w3.data<float>(), f * d, 1.0f,
                    dx.data<float>());
}

MoeExpertsImpl moe_experts_impl_cpu() {
  return {"moe_experts_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu};
}

MoeExpertsImpl moe_experts_impl_meta() {
  const auto forward = [](const Tensor& x, const Tensor&, const Tensor& w1, const Tensor&, const Tensor&, Tensor&,
                          MoeExpertsSaved& saved) {
    saved.gate_PF = rows_PF(x, w1);
    saved.up_PF = rows_PF(x, w1);
    (void)rows_PF(x, w1);  // h
  };
  const auto backward = [](const Tensor&, const Tensor&, const Tensor&, const Tensor& x, const Tensor&,
                           const Tensor& w1, const Tensor&, const Tensor&, const MoeExpertsSaved&, Tensor&, Tensor&,
                           Tensor&, Tensor&, Tensor&) {
    const Tensor dh = rows_PF(x, w1), h = rows_PF(x, w1), dup = rows_PF(x, w1);  // live together at the end
  };
  return {"moe_experts_meta", Device::meta, nullptr, forward, backward};
}

}  // namespace titan::ops
