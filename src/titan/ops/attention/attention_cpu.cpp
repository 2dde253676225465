// GQA attention on CPU (causal with offsets, or full), FlashAttention-2 style: query tiles x key tiles, the score tile
// S = Q K^T through kernels::gemm (the tensors' own row strides as leading dims, no copies),
// online softmax with exp16, O accumulated through gemm. Nothing [T, T] is ever stored; scratch
// is a few tile-sized buffers per work item. Scheme and derivation: attention.md.
//
// Compute precision (attention.h): f32 runs the products on the f32 tensors. bf16 runs them on
// bf16 operands, in one of two branches with the same numbers up to summation order:
//   native:   q/k/v/dO cast to bf16 once, P and dS cast per tile, products through
//             kernels::gemm_bf16 (titan's AMX kernel, or oneDNN's AVX-512-BF16 dot products; f32
//             accumulation);
//   emulated: the same values rounded to bf16 but held in f32, products through kernels::gemm
//             (f32 FMAs; products of bf16 values are exact in f32). Taken where the CPU (or
//             oneDNN's ISA cap) has no bf16 dot products, or when args.emulate_bf16.
// The code is one template over the operand element type E: float (f32, emulated) or uint16_t
// (native bf16 bits).
//
// Legend: Q tile [rows, K] of q (row stride H*K), K tile [cols, K] of k (row stride G*K), V tile
// [cols, Kv] of v (row stride G*Kv), O tile [rows, Kv] of out (row stride H*Kv), S/P/dP/dS tiles
// [rows, cols] in scratch with row stride kBlockK. Query row i sits at position q_offset + i,
// key row j at kv_offset + j (attention.h); with both 0, Tq = Tk and a causal mask this is the
// plain causal kernel, the same operations in the same order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/cast.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/attention/attention.h"

namespace titan::ops {

using namespace titan::kernels;

namespace {

// Tile sizes, chosen by measurement (attention.md). Both are multiples of 16 so that a score
// row, and the per-row softmax state, pad to the vector width inside their buffers.
constexpr int64_t kBlockQ = 128;
constexpr int64_t kBlockK = 128;
static_assert(kBlockQ % kLanes == 0 && kBlockK % kLanes == 0);

struct Dims {
  int64_t b, tq, tk, h, g, k, kv;
  int64_t group;           // query heads per kv head (H / G)
  int64_t ldq, ldk, ldv, ldo;  // row strides: H*K (q), G*K (k), G*Kv (v), H*Kv (out)
  int64_t num_qt, num_kt;
  float scale;
  bool causal;
  int64_t shift;  // kv_offset - q_offset: query row i sees key row j when j + shift <= i (causal)

  // Keys of a tile starting at k0 (cols wide) that query row i sees: a prefix of the tile.
  int64_t visible(int64_t i, int64_t k0, int64_t cols) const {
    return causal ? std::clamp<int64_t>(i - shift - k0 + 1, 0, cols) : cols;
  }
  // Key rows [0, key_end) hold every key that query rows [q0, q0 + rows) see.
  int64_t key_end(int64_t q0, int64_t rows) const {
    return causal ? std::clamp<int64_t>(q0 + rows - shift, 0, tk) : tk;
  }
  // The first query tile with a row that sees key row k0 (num_qt: none).
  int64_t first_query_tile(int64_t k0) const {
    if (!causal) return 0;
    return std::min((std::max<int64_t>(0, k0 + shift)) / kBlockQ, num_qt);
  }
};

Dims make_dims(const AttentionArgs& args, const Tensor& q, const Tensor& k, const Tensor& v) {
  Dims d{};
  d.b = q.size(0), d.tq = q.size(1), d.tk = k.size(1), d.h = q.size(2), d.g = k.size(2), d.k = q.size(3);
  d.kv = v.size(3);
  d.group = d.h / d.g;
  d.ldq = d.h * d.k, d.ldk = d.g * d.k, d.ldv = d.g * d.kv, d.ldo = d.h * d.kv;
  d.num_qt = (d.tq + kBlockQ - 1) / kBlockQ;
  d.num_kt = (d.tk + kBlockK - 1) / kBlockK;
  d.scale = attention_scale(args, d.k);
  d.causal = args.mask == AttentionMask::causal;
  d.shift = args.kv_offset - args.q_offset;
  return d;
}

// Offset of row (b, t, head) in a [B, T, heads, width] tensor.
int64_t row_offset(int64_t b, int64_t t, int64_t head, int64_t rows, int64_t heads, int64_t width) {
  return ((b * rows + t) * heads + head) * width;
}

int64_t round_up16(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

// --- operands --------------------------------------------------------------------------------

// x[0, n) rounded to bf16 in place (values stay f32): the emulated branch's rounding, with the
// cast kernels' bits.
void round_bf16_inplace(float* x, int64_t n) {
  uint16_t bits[256];
  for (int64_t i = 0; i < n; i += 256) {
    const int64_t len = std::min<int64_t>(256, n - i);
    cast_f32_to_bf16(x + i, bits, len);
    cast_bf16_to_f32(bits, x + i, len);
  }
}

// A tile's n f32 values (P or dS) as the next product's operand: as they are (f32), rounded in
// place (`round`: emulated bf16), or cast into `bits` (native bf16).
const float* tile_operand(float* x, int64_t n, bool round, std::vector<float>&) {
  if (round) round_bf16_inplace(x, n);
  return x;
}
const uint16_t* tile_operand(float* x, int64_t n, bool, std::vector<uint16_t>& bits) {
  cast_f32_to_bf16(x, bits.data(), n);
  return bits.data();
}

// A whole f32 tensor as operand storage: the tensor itself (f32), a bf16-rounded f32 copy
// (emulated) or a bf16 copy (native), cast in parallel.
const float* tensor_operand(const float* x, int64_t n, bool round, std::vector<float>& buf) {
  if (!round) return x;
  buf.resize(static_cast<size_t>(n));
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) {
    std::memcpy(buf.data() + b, x + b, sizeof(float) * (e - b));
    round_bf16_inplace(buf.data() + b, e - b);
  });
  return buf.data();
}
const uint16_t* tensor_operand(const float* x, int64_t n, bool, std::vector<uint16_t>& buf) {
  buf.resize(static_cast<size_t>(n));
  parallel_for(n, 1 << 14, [&](int64_t b, int64_t e) { cast_f32_to_bf16(x + b, buf.data() + b, e - b); });
  return buf.data();
}

// Buffers reused across calls, one set per thread: the operand copies of a call (the calling
// thread's) and the tiles of a work item (the worker's). Fresh vectors per call cost page faults
// and allocator time, ~20% of the bf16 kernel's time in a perf profile. The copies keep the
// largest size seen (bf16 q/k/v/dO of one layer's call) for the life of the thread.
template <class E>
struct Scratch {
  static constexpr size_t kTile = kBlockQ * kBlockK;
  std::vector<E> q, k, v, dout;      // operand copies (bf16 only)
  std::vector<float> dout_rounded;   // backward, native bf16: bf16(dO) as f32, for D
  std::vector<float> d;              // backward: D per query row [B, H, T]
  std::vector<float> p, ds;          // tiles [kBlockQ, kBlockK]: S / P, and dP / dS
  std::vector<E> p_bits, ds_bits;    // their bf16 casts (native bf16 only)
  Scratch() : p(kTile), ds(kTile), p_bits(std::is_same_v<E, float> ? 0 : kTile),
              ds_bits(std::is_same_v<E, float> ? 0 : kTile) {}
};

template <class E>
Scratch<E>& scratch() {
  thread_local Scratch<E> s;
  return s;
}

// Which branch bf16 takes: native wherever gemm_bf16 has bf16 instructions (AMX tiles or AVX-512-BF16
// dot products, DNNL_MAX_CPU_ISA not capping them), unless the caller asks for the emulated one.
// With AMX the tiles run on titan's AMX kernel: native 155 ms, emulated 337 ms for one layer's
// forward + backward on 2 Xeon cores (oneDNN's AMX matmul made native the slower one, 572 ms;
// attention.md).
bool bf16_native(const AttentionArgs& args) {
  return args.compute == DType::bf16 && !args.emulate_bf16 && attention_cpu_bf16_tiles();
}

// --- forward ---------------------------------------------------------------------------------

// One online-softmax step over a score tile s [rows, cols] (row stride kBlockK) for query rows
// q0.. and keys k0..: masks invisible keys, turns s into P = exp(s - m_new) (0 where masked, and
// in the padding up to a multiple of 16), updates the running max m and sum l, and returns
// alpha = exp(m_old - m_new) per row for rescaling the output accumulated so far. m, l and
// alpha hold kBlockQ entries (rows past `rows` are padding).
// pow2 (bf16): m holds an integer n instead, the offset subtracted is n ln 2 with n =
// ceil(max / ln 2), and alpha = 2^(n_old - n_new) exactly, so a P already rounded to bf16 and
// accumulated into O keeps its rounding when rescaled (attention.h's rule, tiling-independent).
TITAN_SIMD_KERNEL(void, online_softmax_tile,
                  (const Dims& d, bool pow2, int64_t rows, int64_t cols, int64_t q0, int64_t k0, float* s, float* m,
                   float* l, float* alpha),
                  (d, pow2, rows, cols, q0, k0, s, m, l, alpha)) {
  constexpr float kLn2 = 0.693147180559945309f, kLog2e = 1.44269504088896341f;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  const int64_t cols16 = round_up16(cols);
  float m_new[kBlockQ], row_sum[kBlockQ];
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = s + r * kBlockK;
    const int64_t n = d.visible(q0 + r, k0, cols);
    f32x16 vmax = splat16<f32x16>(neg_inf);
    for (int64_t c = 0; c < cols16; c += kLanes) {
      f32x16 x = load16<f32x16>(sr + c);
      if (c + kLanes > n) {
        x = keep_first(x, n - c, neg_inf);
        store16(sr + c, x);
      }
      vmax = max16(vmax, x);
    }
    // n == 0 (a row above the diagonal in this tile): m stays, P = exp(-inf) = 0.
    const float mr = pow2 ? std::max(m[r], std::ceil(hmax16(vmax) * kLog2e)) : std::max(m[r], hmax16(vmax));
    m_new[r] = mr;
    const f32x16 vm = splat16<f32x16>(mr == neg_inf ? 0.0f : pow2 ? mr * kLn2 : mr);
    f32x16 vsum = {};
    for (int64_t c = 0; c < cols16; c += kLanes) {
      const f32x16 p = exp16(load16<f32x16>(sr + c) - vm);  // exp(-inf) = 0 for masked lanes
      store16(sr + c, p);
      vsum += p;
    }
    row_sum[r] = hsum16(vsum);
  }
  for (int64_t r = rows; r < round_up16(rows); ++r) m_new[r] = 0.0f, row_sum[r] = 0.0f;
  if (pow2) {
    for (int64_t r = 0; r < rows; ++r) {
      const float a = m_new[r] == neg_inf ? 1.0f
                      : m[r] == neg_inf   ? 0.0f
                                          : std::ldexp(1.0f, static_cast<int>(m[r] - m_new[r]));
      alpha[r] = a;
      l[r] = l[r] * a + row_sum[r];
      m[r] = m_new[r];
    }
    return;
  }
  // Sixteen rows at a time: alpha = exp(m_old - m_new) (0 on the first tile, where m_old = -inf;
  // 1 while a row has seen no visible key), l = alpha * l + row_sum.
  for (int64_t r = 0; r < rows; r += kLanes) {
    const f32x16 mo = load16<f32x16>(m + r), mn = load16<f32x16>(m_new + r);
    const f32x16 a = exp16(select(mn == neg_inf, splat16<f32x16>(0.0f), mo - mn));
    store16(alpha + r, a);
    store16(l + r, fmadd(load16<f32x16>(l + r), a, load16<f32x16>(row_sum + r)));
    store16(m + r, mn);
  }
}

// o[r, :] *= f[r] for rows of length k with row stride ld.
TITAN_SIMD_KERNEL(void, scale_rows,
                  (int64_t rows, int64_t k, float* o, int64_t ld, const float* f),
                  (rows, k, o, ld, f)) {
  for (int64_t r = 0; r < rows; ++r) {
    float* orow = o + r * ld;
    const f32x16 vf = splat16<f32x16>(f[r]);
    int64_t c = 0;
    for (; c + kLanes <= k; c += kLanes) store16(orow + c, load16<f32x16>(orow + c) * vf);
    for (; c < k; ++c) orow[c] *= f[r];
  }
}

// Output rows [q0, q0 + rows) of query head h in batch b: loops over the visible key tiles,
// accumulating straight into out (its rows are this work item's alone).
// `round`: bf16 compute (P is rounded before P V; online softmax with power-of-two rescaling).
template <class E>
void forward_tile(const Dims& d, bool round, int64_t b, int64_t h, int64_t qt, const E* q,
                  const E* k, const E* v, float* out, float* lse, Scratch<E>& sc) {
  float* s = sc.p.data();
  const int64_t q0 = qt * kBlockQ, rows = std::min(kBlockQ, d.tq - q0);
  const int64_t g = h / d.group;
  const E* q_i = q + row_offset(b, q0, h, d.tq, d.h, d.k);
  float* o_i = out + row_offset(b, q0, h, d.tq, d.h, d.kv);
  float m[kBlockQ], l[kBlockQ], alpha[kBlockQ];
  for (int64_t r = 0; r < kBlockQ; ++r) m[r] = -std::numeric_limits<float>::infinity(), l[r] = 0.0f;
  const int64_t key_end = d.key_end(q0, rows);
  if (key_end == 0) {  // no row of this tile sees a key: out 0 (lse -inf below)
    for (int64_t r = 0; r < rows; ++r) std::memset(o_i + r * d.ldo, 0, sizeof(float) * d.kv);
  }
  for (int64_t k0 = 0; k0 < key_end; k0 += kBlockK) {  // key tiles up to the diagonal
    const int64_t cols = std::min(kBlockK, d.tk - k0);
    const E* k_j = k + row_offset(b, k0, g, d.tk, d.g, d.k);
    const E* v_j = v + row_offset(b, k0, g, d.tk, d.g, d.kv);
    gemm(false, true, rows, cols, d.k, d.scale, q_i, d.ldq, k_j, d.ldk, 0.0f, s, kBlockK);
    online_softmax_tile(d, round, rows, cols, q0, k0, s, m, l, alpha);
    if (k0 > 0) scale_rows(rows, d.kv, o_i, d.ldo, alpha);
    const E* p = tile_operand(s, rows * kBlockK, round, sc.p_bits);
    gemm(false, false, rows, d.kv, cols, 1.0f, p, kBlockK, v_j, d.ldv, k0 > 0 ? 1.0f : 0.0f, o_i, d.ldo);
  }
  float inv_l[kBlockQ];
  float* lse_i = lse + (b * d.h + h) * d.tq + q0;
  const float offset = round ? 0.693147180559945309f : 1.0f;  // m is n (of n ln 2) in bf16
  for (int64_t r = 0; r < rows; ++r) {
    // l = 0: the row saw no key (its P were all 0), so out stays 0 and lse = -inf.
    inv_l[r] = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
    lse_i[r] = l[r] > 0.0f ? m[r] * offset + std::log(l[r]) : -std::numeric_limits<float>::infinity();
  }
  scale_rows(rows, d.kv, o_i, d.ldo, inv_l);
}

template <class E>
void forward_run(const AttentionArgs& args, const Tensor& q_BTHK, const Tensor& k_BTGK,
                 const Tensor& v_BTGK, Tensor& out_BTHK, AttentionSaved& saved) {
  const Dims d = make_dims(args, q_BTHK, k_BTGK, v_BTGK);
  const bool round = args.compute == DType::bf16;
  Scratch<E>& call = scratch<E>();
  const E* q = tensor_operand(q_BTHK.data<float>(), q_BTHK.numel(), round, call.q);
  const E* k = tensor_operand(k_BTGK.data<float>(), k_BTGK.numel(), round, call.k);
  const E* v = tensor_operand(v_BTGK.data<float>(), v_BTGK.numel(), round, call.v);
  float* out = out_BTHK.data<float>();
  float* lse = saved.lse_BHT.data<float>();
  const int64_t bh = d.b * d.h;
  // Items (b, h, query tile), the last query tiles (the most key tiles) handed out first.
  parallel_for_each_dynamic(bh * d.num_qt, [&](int64_t item) {
    const int64_t qt = d.num_qt - 1 - item / bh;
    const int64_t b = (item % bh) / d.h, h = item % d.h;
    forward_tile(d, round, b, h, qt, q, k, v, out, lse, scratch<E>());
  });
}

void forward_cpu(const AttentionArgs& args, const Tensor& q_BTHK, const Tensor& k_BTGK,
                 const Tensor& v_BTGK, Tensor& out_BTHK, AttentionSaved& saved) {
  if (bf16_native(args)) {
    forward_run<uint16_t>(args, q_BTHK, k_BTGK, v_BTGK, out_BTHK, saved);
  } else {
    forward_run<float>(args, q_BTHK, k_BTGK, v_BTGK, out_BTHK, saved);
  }
}

// --- backward --------------------------------------------------------------------------------

// D[b, h, t] = dout_row . out_row (= sum_j P_ij dP_ij), for rows [begin, end) of [B*T*H]
// (dout is the bf16-rounded copy in the emulated branch; see backward_run for native).
TITAN_SIMD_KERNEL(void, rowdot_rows,
                  (const Dims& d, int64_t begin, int64_t end, const float* dout, const float* out,
                   float* d_BHT),
                  (d, begin, end, dout, out, d_BHT)) {
  for (int64_t n = begin; n < end; ++n) {
    const float* a = dout + n * d.kv;
    const float* o = out + n * d.kv;
    f32x16 acc = {};
    int64_t c = 0;
    for (; c + kLanes <= d.kv; c += kLanes) acc = fmadd(load16<f32x16>(a + c), load16<f32x16>(o + c), acc);
    if (c < d.kv) acc = fmadd(load16_partial<f32x16>(a + c, d.kv - c), load16_partial<f32x16>(o + c, d.kv - c), acc);
    const float sum = hsum16(acc);
    const int64_t h = n % d.h, bt = n / d.h;
    d_BHT[(bt / d.tq * d.h + h) * d.tq + bt % d.tq] = sum;
  }
}

// From S (in p) and dP (in ds): P = exp(S - lse) (0 where masked), dS = P * (dP - D).
TITAN_SIMD_KERNEL(void, softmax_grad_tile,
                  (const Dims& d, int64_t rows, int64_t cols, int64_t q0, int64_t k0, const float* lse_i,
                   const float* d_i, float* p, float* ds),
                  (d, rows, cols, q0, k0, lse_i, d_i, p, ds)) {
  const int64_t cols16 = round_up16(cols);
  for (int64_t r = 0; r < rows; ++r) {
    float* pr = p + r * kBlockK;
    float* dsr = ds + r * kBlockK;
    const int64_t n = d.visible(q0 + r, k0, cols);
    const f32x16 vlse = splat16<f32x16>(lse_i[r]), vd = splat16<f32x16>(d_i[r]);
    for (int64_t c = 0; c < cols16; c += kLanes) {
      f32x16 pv = exp16(load16<f32x16>(pr + c) - vlse);
      if (c + kLanes > n) pv = keep_first(pv, n - c, 0.0f);
      store16(pr + c, pv);
      store16(dsr + c, pv * (load16<f32x16>(dsr + c) - vd));
    }
  }
}

template <class E>
struct BackwardPtrs {
  const E *dout, *q, *k, *v;
  const float *lse, *d;
  float *dq, *dk, *dv;
  bool round;  // bf16 compute: P and dS rounded as operands
};

enum TileGrads : int { kGradQ = 1, kGradKV = 2 };

// One (query tile, key tile) pair of query head h: recomputes P and dS and adds the requested
// gradient contributions: dV_j += P^T dO_i, dK_j += scale dS^T Q_i, dQ_i += scale dS K_j.
template <class E>
void backward_pair(const Dims& d, const BackwardPtrs<E>& x, int64_t b, int64_t h, int64_t q0,
                   int64_t k0, int grads, Scratch<E>& sc) {
  const int64_t rows = std::min(kBlockQ, d.tq - q0), cols = std::min(kBlockK, d.tk - k0);
  const int64_t g = h / d.group;
  const int64_t qo = row_offset(b, q0, h, d.tq, d.h, d.k), oo = row_offset(b, q0, h, d.tq, d.h, d.kv);
  const int64_t ko = row_offset(b, k0, g, d.tk, d.g, d.k), vo = row_offset(b, k0, g, d.tk, d.g, d.kv);
  const int64_t lo = (b * d.h + h) * d.tq + q0;
  gemm(false, true, rows, cols, d.k, d.scale, x.q + qo, d.ldq, x.k + ko, d.ldk, 0.0f,
     sc.p.data(), kBlockK);  // S
  gemm(false, true, rows, cols, d.kv, 1.0f, x.dout + oo, d.ldo, x.v + vo, d.ldv, 0.0f,
     sc.ds.data(), kBlockK);  // dP
  softmax_grad_tile(d, rows, cols, q0, k0, x.lse + lo, x.d + lo, sc.p.data(), sc.ds.data());
  const int64_t n = rows * kBlockK;
  const E* ds = tile_operand(sc.ds.data(), n, x.round, sc.ds_bits);
  if (grads & kGradKV) {
    const E* p = tile_operand(sc.p.data(), n, x.round, sc.p_bits);
    gemm(true, false, cols, d.kv, rows, 1.0f, p, kBlockK, x.dout + oo, d.ldo, 1.0f, x.dv + vo,
       d.ldv);
    gemm(true, false, cols, d.k, rows, d.scale, ds, kBlockK, x.q + qo, d.ldq, 1.0f, x.dk + ko,
       d.ldk);
  }
  if (grads & kGradQ) {
    gemm(false, false, rows, d.k, cols, d.scale, ds, kBlockK, x.k + ko, d.ldk, 1.0f, x.dq + qo,
       d.ldq);
  }
}

// Zeroes rows [t0, t0 + n) of one head of a [B, T, heads, width] tensor.
void zero_rows(float* x, int64_t b, int64_t t0, int64_t n, int64_t head, int64_t t, int64_t heads,
               int64_t width) {
  for (int64_t r = t0; r < t0 + n; ++r) {
    std::memset(x + row_offset(b, r, head, t, heads, width), 0, sizeof(float) * width);
  }
}

// Fused scheme: one item per (b, kv head g) owns dK/dV of g and dQ of g's query heads, so every
// pair is visited once (5 GEMMs per pair) with no races. Used when B*G spreads evenly over the
// threads.
template <class E>
void backward_fused(const Dims& d, const BackwardPtrs<E>& x) {
  parallel_for_each_dynamic(d.b * d.g, [&](int64_t item) {
    const int64_t b = item / d.g, g = item % d.g;
    zero_rows(x.dk, b, 0, d.tk, g, d.tk, d.g, d.k);
    zero_rows(x.dv, b, 0, d.tk, g, d.tk, d.g, d.kv);
    for (int64_t hh = 0; hh < d.group; ++hh) zero_rows(x.dq, b, 0, d.tq, g * d.group + hh, d.tq, d.h, d.k);
    Scratch<E>& sc = scratch<E>();
    for (int64_t k0 = 0; k0 < d.tk; k0 += kBlockK) {
      for (int64_t hh = 0; hh < d.group; ++hh) {
        for (int64_t q0 = d.first_query_tile(k0) * kBlockQ; q0 < d.tq; q0 += kBlockQ) {
          backward_pair(d, x, b, g * d.group + hh, q0, k0, kGradQ | kGradKV, sc);
        }
      }
    }
  });
}

// Split scheme, for few (b, g) pairs: pass 1 has one item per (b, g, key tile) owning that
// tile's dK/dV; pass 2 one item per (b, h, query tile) owning its dQ rows. S and dP are
// recomputed in pass 2 (7 GEMMs per pair instead of 5) in exchange for T/kBlock-fold parallelism.
template <class E>
void backward_split(const Dims& d, const BackwardPtrs<E>& x) {
  const int64_t bg = d.b * d.g, bh = d.b * d.h;
  // Pass 1: the first key tiles (the most query tiles) handed out first.
  parallel_for_each_dynamic(bg * d.num_kt, [&](int64_t item) {
    const int64_t kt = item / bg, b = (item % bg) / d.g, g = item % d.g;
    const int64_t k0 = kt * kBlockK, cols = std::min(kBlockK, d.tk - k0);
    zero_rows(x.dk, b, k0, cols, g, d.tk, d.g, d.k);
    zero_rows(x.dv, b, k0, cols, g, d.tk, d.g, d.kv);
    Scratch<E>& sc = scratch<E>();
    for (int64_t hh = 0; hh < d.group; ++hh) {
      for (int64_t q0 = d.first_query_tile(k0) * kBlockQ; q0 < d.tq; q0 += kBlockQ) {
        backward_pair(d, x, b, g * d.group + hh, q0, k0, kGradKV, sc);
      }
    }
  });
  // Pass 2: the last query tiles (the most key tiles) handed out first.
  parallel_for_each_dynamic(bh * d.num_qt, [&](int64_t item) {
    const int64_t qt = d.num_qt - 1 - item / bh, b = (item % bh) / d.h, h = item % d.h;
    const int64_t q0 = qt * kBlockQ, rows = std::min(kBlockQ, d.tq - q0);
    zero_rows(x.dq, b, q0, rows, h, d.tq, d.h, d.k);
    Scratch<E>& sc = scratch<E>();
    for (int64_t k0 = 0, end = d.key_end(q0, rows); k0 < end; k0 += kBlockK) {
      backward_pair(d, x, b, h, q0, k0, kGradQ, sc);
    }
  });
}

template <class E>
void backward_run(const AttentionArgs& args, const Tensor& dout_BTHK, const Tensor& dlse_BHT,
                  const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK, const Tensor& out_BTHK,
                  const AttentionSaved& saved, Tensor& dq_BTHK, Tensor& dk_BTGK, Tensor& dv_BTGK) {
  const Dims d = make_dims(args, q_BTHK, k_BTGK, v_BTGK);
  const bool round = args.compute == DType::bf16;
  Scratch<E>& call = scratch<E>();
  const E* dout = tensor_operand(dout_BTHK.data<float>(), dout_BTHK.numel(), round, call.dout);
  // d_BHT: D_i = dout_i . out_i per query row, laid out like lse; dout bf16-rounded in bf16
  // (the native branch rounds a copy for this one pass).
  std::vector<float>& d_BHT = call.d;
  d_BHT.resize(static_cast<size_t>(d.b * d.h * d.tq));
  const float* dout_f32 = dout_BTHK.data<float>();
  if constexpr (std::is_same_v<E, float>) {
    dout_f32 = dout;
  } else {
    dout_f32 = tensor_operand(dout_f32, dout_BTHK.numel(), true, call.dout_rounded);
  }
  const float* out = out_BTHK.data<float>();
  parallel_for(d.b * d.tq * d.h, 64, [&](int64_t begin, int64_t end) {
    rowdot_rows(d, begin, end, dout_f32, out, d_BHT.data());
  });
  // lse's own gradient: dS_ij = P_ij (dP_ij - D_i + dlse_i), so D_i - dlse_i takes D's place.
  if (dlse_BHT.defined()) {
    const float* dlse = dlse_BHT.data<float>();
    for (size_t i = 0; i < d_BHT.size(); ++i) d_BHT[i] -= dlse[i];
  }
  const BackwardPtrs<E> x{dout,
                          tensor_operand(q_BTHK.data<float>(), q_BTHK.numel(), round, call.q),
                          tensor_operand(k_BTGK.data<float>(), k_BTGK.numel(), round, call.k),
                          tensor_operand(v_BTGK.data<float>(), v_BTGK.numel(), round, call.v),
                          saved.lse_BHT.data<float>(),
                          d_BHT.data(),
                          dq_BTHK.data<float>(),
                          dk_BTGK.data<float>(),
                          dv_BTGK.data<float>(),
                          round};
  // Fused when the (b, g) items fill the threads to at least 3/4 (each item is the same work).
  const int64_t threads = omp_in_parallel() ? 1 : num_threads();
  const int64_t items = d.b * d.g;
  const int64_t rounds = (items + threads - 1) / threads;
  if (4 * items >= 3 * rounds * threads) {
    backward_fused(d, x);
  } else {
    backward_split(d, x);
  }
}

void backward_cpu(const AttentionArgs& args, const Tensor& dout_BTHK, const Tensor& dlse_BHT,
                  const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK, const Tensor& out_BTHK,
                  const AttentionSaved& saved, Tensor& dq_BTHK, Tensor& dk_BTGK, Tensor& dv_BTGK) {
  if (bf16_native(args)) {
    backward_run<uint16_t>(args, dout_BTHK, dlse_BHT, q_BTHK, k_BTGK, v_BTGK, out_BTHK, saved, dq_BTHK,
                           dk_BTGK, dv_BTGK);
  } else {
    backward_run<float>(args, dout_BTHK, dlse_BHT, q_BTHK, k_BTGK, v_BTGK, out_BTHK, saved, dq_BTHK,
                        dk_BTGK, dv_BTGK);
  }
}

}  // namespace

AttentionImpl attention_impl_cpu() {
  return {"attention_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu};
}

bool attention_cpu_bf16_tiles() { return !gemm_bf16_is_emulated(); }

}  // namespace titan::ops
