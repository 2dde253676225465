// Sparse MoE on CPU: router GEMM + per-token softmax/top-k; dispatch by a stable counting sort of
// the (token, k) pairs by expert; one grouped GEMM per projection over all experts (tiles of every
// expert's contiguous rows handed to threads dynamically, each tile one kernels::gemm call);
// SwiGLU through the swiglu op's CPU kernel; combine per token with k ascending. Backward mirrors
// it (moe.md). Every output element is produced by one GEMM over a tile whose shape depends only
// on the routing, never on the thread count, and nothing is accumulated atomically: results are
// bitwise reproducible.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/ops/moe/moe.h"
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
// Tokens per thread chunk at least in the per-token loops.
constexpr int64_t kTokenGrain = 16;

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

// rows_PD[r] = src_ND[pair_of_row[r] / top_k]
void gather_rows(int64_t p, int64_t d, int64_t top_k, const int32_t* pair_of_row,
                 const float* src, float* rows) {
  parallel_for(p, kTokenGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      std::memcpy(rows + r * d, src + (pair_of_row[r] / top_k) * d, sizeof(float) * d);
    }
  });
}

}  // namespace

static void forward_cpu(const MoeArgs& args, const Tensor& x, const Tensor& w_gate,
                        const Tensor& w1, const Tensor& w3, const Tensor& w2, Tensor& out,
                        Tensor& logits, MoeSaved& saved) {
  const int64_t n = x.size(0), d = x.size(1), e = w_gate.size(0), f = w1.size(1);
  const int64_t kk = args.top_k, p = n * kk;
  saved.probs_NE = Tensor::empty({n, e});
  saved.expert_NK = Tensor::empty({n, kk}, DType::i32);
  saved.weight_NK = Tensor::empty({n, kk});
  saved.expert_counts_E = Tensor::zeros({e}, DType::i64);
  saved.offsets_E1 = Tensor::zeros({e + 1}, DType::i64);
  saved.row_of_pair_NK = Tensor::empty({n, kk}, DType::i32);
  saved.pair_of_row_P = Tensor::empty({p}, DType::i32);
  saved.gate_PF = Tensor::empty({p, f});
  saved.up_PF = Tensor::empty({p, f});
  if (n == 0) return;
  const float* xp = x.data<float>();
  float* zp = logits.data<float>();
  float* probs = saved.probs_NE.data<float>();
  int32_t* expert = saved.expert_NK.data<int32_t>();
  float* weight = saved.weight_NK.data<float>();

  // Router: logits, softmax (fp32 values, double sums), top-k by logit (= by prob; by prob + bias
  // when balancing by bias; ties to the lower index), weights.
  gemm(false, true, n, e, d, 1.0f, xp, d, w_gate.data<float>(), d, 0.0f, zp, e);
  const float* bias = args.selection_bias_E.defined() ? args.selection_bias_E.data<float>() : nullptr;
  parallel_for(n, kTokenGrain, [&](int64_t begin, int64_t end) {
    std::vector<char> taken(static_cast<size_t>(e));
    std::vector<float> biased(static_cast<size_t>(e));
    for (int64_t t = begin; t < end; ++t) {
      const float* z = zp + t * e;
      float* pt = probs + t * e;
      const float zmax = *std::max_element(z, z + e);
      double sum = 0.0;
      for (int64_t j = 0; j < e; ++j) sum += (pt[j] = std::exp(z[j] - zmax));
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < e; ++j) pt[j] *= inv;
      std::fill(taken.begin(), taken.end(), 0);
      const float* key = z;  // the logits order the probs without rounding ties
      if (bias != nullptr) {
        for (int64_t j = 0; j < e; ++j) biased[static_cast<size_t>(j)] = pt[j] + bias[j];
        key = biased.data();
      }
      double psum = 0.0;
      for (int64_t k = 0; k < kk; ++k) {
        int64_t best = -1;
        for (int64_t j = 0; j < e; ++j) {
          if (!taken[j] && (best < 0 || key[j] > key[best])) best = j;
        }
        taken[best] = 1;
        expert[t * kk + k] = static_cast<int32_t>(best);
        psum += pt[best];
      }
      for (int64_t k = 0; k < kk; ++k) {
        const float pk = pt[expert[t * kk + k]];
        weight[t * kk + k] = args.norm_topk_prob ? static_cast<float>(pk / psum) : pk;
      }
    }
  });

  // Dispatch: stable counting sort of the pairs by expert.
  int64_t* counts = saved.expert_counts_E.data<int64_t>();
  int64_t* offsets = saved.offsets_E1.data<int64_t>();
  int32_t* row_of_pair = saved.row_of_pair_NK.data<int32_t>();
  int32_t* pair_of_row = saved.pair_of_row_P.data<int32_t>();
  for (int64_t q = 0; q < p; ++q) ++counts[expert[q]];
  for (int64_t j = 0; j < e; ++j) offsets[j + 1] = offsets[j] + counts[j];
  {
    std::vector<int64_t> cursor(offsets, offsets + e);
    for (int64_t q = 0; q < p; ++q) {
      const int64_t r = cursor[static_cast<size_t>(expert[q])]++;
      row_of_pair[q] = static_cast<int32_t>(r);
      pair_of_row[r] = static_cast<int32_t>(q);
    }
  }

  // Experts: gate = xs w1^T, up = xs w3^T, h = silu(gate) * up, y = h w2^T (grouped).
  Tensor xs = Tensor::empty({p, d}), h = Tensor::empty({p, f}), y = Tensor::empty({p, d});
  gather_rows(p, d, kk, pair_of_row, xp, xs.data<float>());
  grouped_gemm_rows(offsets, e, true, f, d, xs.data<float>(), w1.data<float>(), f * d, 0.0f,
                    saved.gate_PF.data<float>());
  grouped_gemm_rows(offsets, e, true, f, d, xs.data<float>(), w3.data<float>(), f * d, 0.0f,
                    saved.up_PF.data<float>());
  swiglu_impl_cpu().forward(saved.gate_PF, saved.up_PF, h);
  grouped_gemm_rows(offsets, e, true, d, f, h.data<float>(), w2.data<float>(), d * f, 0.0f,
                    y.data<float>());

  // Combine: per token, k ascending.
  const float* yp = y.data<float>();
  float* op = out.data<float>();
  parallel_for(n, kTokenGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* o = op + t * d;
      for (int64_t k = 0; k < kk; ++k) {
        const float w = weight[t * kk + k];
        const float* yr = yp + row_of_pair[t * kk + k] * d;
        if (k == 0) {
          for (int64_t i = 0; i < d; ++i) o[i] = w * yr[i];
        } else {
          for (int64_t i = 0; i < d; ++i) o[i] += w * yr[i];
        }
      }
    }
  });
}

static void backward_cpu(const MoeArgs& args, const Tensor& dout, const Tensor& dlogits,
                         const Tensor& x, const Tensor& w_gate, const Tensor& w1, const Tensor& w3,
                         const Tensor& w2, const MoeSaved& saved, Tensor& dx, Tensor& dw_gate,
                         Tensor& dw1, Tensor& dw3, Tensor& dw2) {
  const int64_t n = x.size(0), d = x.size(1), e = w_gate.size(0), f = w1.size(1);
  const int64_t kk = args.top_k, p = n * kk;
  if (n == 0) return;
  const float* xp = x.data<float>();
  const float* probs = saved.probs_NE.data<float>();
  const int32_t* expert = saved.expert_NK.data<int32_t>();
  const float* weight = saved.weight_NK.data<float>();
  const int64_t* offsets = saved.offsets_E1.data<int64_t>();
  const int32_t* row_of_pair = saved.row_of_pair_NK.data<int32_t>();
  const int32_t* pair_of_row = saved.pair_of_row_P.data<int32_t>();

  // g_PD: dout of each dispatch row's token. dh'_PF = g w2 (unweighted), h = swiglu(gate, up).
  Tensor g = Tensor::empty({p, d}), dh = Tensor::empty({p, f}), h = Tensor::empty({p, f});
  gather_rows(p, d, kk, pair_of_row, dout.data<float>(), g.data<float>());
  grouped_gemm_rows(offsets, e, false, f, d, g.data<float>(), w2.data<float>(), d * f, 0.0f,
                    dh.data<float>());
  swiglu_impl_cpu().forward(saved.gate_PF, saved.up_PF, h);

  // Per row: dweight = dh' . h (= dout . y); then dh = w dh' and h <- w h for dw2.
  std::vector<float> dweight(static_cast<size_t>(p));
  float* dhp = dh.data<float>();
  float* hp = h.data<float>();
  parallel_for(p, kTokenGrain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int32_t q = pair_of_row[r];
      const float w = weight[q];
      float* dhr = dhp + r * f;
      float* hr = hp + r * f;
      double acc = 0.0;
      for (int64_t o = 0; o < f; ++o) acc += static_cast<double>(dhr[o]) * hr[o];
      dweight[static_cast<size_t>(q)] = static_cast<float>(acc);
      for (int64_t o = 0; o < f; ++o) {
        dhr[o] *= w;
        hr[o] *= w;
      }
    }
  });
  grouped_gemm_weight_grad(offsets, e, d, f, g.data<float>(), hp, dw2.data<float>());

  // SwiGLU backward (dgate into h's buffer, free now), then dw1, dw3 and the rows' dx.
  Tensor& dgate = h;
  Tensor dup = Tensor::empty({p, f}), xs = Tensor::empty({p, d});
  swiglu_impl_cpu().backward(dh, saved.gate_PF, saved.up_PF, dgate, dup);
  gather_rows(p, d, kk, pair_of_row, xp, xs.data<float>());
  grouped_gemm_weight_grad(offsets, e, f, d, dgate.data<float>(), xs.data<float>(),
                           dw1.data<float>());
  grouped_gemm_weight_grad(offsets, e, f, d, dup.data<float>(), xs.data<float>(),
                           dw3.data<float>());
  Tensor& dxs = g;  // g is consumed
  grouped_gemm_rows(offsets, e, false, d, f, dgate.data<float>(), w1.data<float>(), f * d, 0.0f,
                    dxs.data<float>());
  grouped_gemm_rows(offsets, e, false, d, f, dup.data<float>(), w3.data<float>(), f * d, 1.0f,
                    dxs.data<float>());

  // Router (moe.md): dp through the renormalisation, softmax backward, plus the caller's dlogits.
  Tensor dz = Tensor::empty({n, e});
  float* dzp = dz.data<float>();
  const float* extra = dlogits.defined() ? dlogits.data<float>() : nullptr;
  parallel_for(n, kTokenGrain, [&](int64_t begin, int64_t end) {
    std::vector<double> dp(static_cast<size_t>(e));
    for (int64_t t = begin; t < end; ++t) {
      const float* pt = probs + t * e;
      const int32_t* ex = expert + t * kk;
      const float* dw = dweight.data() + t * kk;
      std::fill(dp.begin(), dp.end(), 0.0);
      if (args.norm_topk_prob) {
        double psum = 0.0, mean = 0.0;
        for (int64_t k = 0; k < kk; ++k) {
          psum += pt[ex[k]];
          mean += static_cast<double>(dw[k]) * weight[t * kk + k];
        }
        for (int64_t k = 0; k < kk; ++k) dp[ex[k]] = (dw[k] - mean) / psum;
      } else {
        for (int64_t k = 0; k < kk; ++k) dp[ex[k]] = dw[k];
      }
      double pdp = 0.0;
      for (int64_t j = 0; j < e; ++j) pdp += pt[j] * dp[j];
      for (int64_t j = 0; j < e; ++j) {
        double v = pt[j] * (dp[j] - pdp);
        if (extra != nullptr) v += extra[t * e + j];
        dzp[t * e + j] = static_cast<float>(v);
      }
    }
  });

  // dx = dz w_gate + sum_k dxs[row(t, k)] (k ascending); dw_gate += dz^T x.
  float* dxp = dx.data<float>();
  gemm(false, false, n, d, e, 1.0f, dzp, e, w_gate.data<float>(), d, 0.0f, dxp, d);
  const float* dxsp = dxs.data<float>();
  parallel_for(n, kTokenGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* o = dxp + t * d;
      for (int64_t k = 0; k < kk; ++k) {
        const float* src = dxsp + row_of_pair[t * kk + k] * d;
        for (int64_t i = 0; i < d; ++i) o[i] += src[i];
      }
    }
  });
  gemm(true, false, e, d, n, 1.0f, dzp, e, xp, d, 1.0f, dw_gate.data<float>(), d);
}

MoeImpl moe_impl_cpu() { return {"moe_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu}; }

}  // namespace titan::ops
