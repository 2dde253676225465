// Grouped-query attention (GQA), memory-efficient: no [Tq, Tk] buffer per head.
//   out = softmax(q k^T * scale + mask) v, per (batch b, query head h).
// Shapes: B batch, Tq query rows, Tk key/value rows, H query heads, G kv heads (H % G == 0),
//   K query/key head dim, Kv value head dim (K for today's models; MLA's differs).
//   q_BTHK [B, Tq, H, K], k_BTGK [B, Tk, G, K], v_BTGK [B, Tk, G, Kv] -> out_BTHK [B, Tq, H, Kv];
//   lse_BHT [B, H, Tq] (log-sum-exp of each query row's scaled visible scores). Query head h reads
//   kv head h / (H / G). All tensors contiguous f32.
// Mask (AttentionArgs): query row i stands at sequence position q_offset + i, key row j at
//   kv_offset + j. causal: key j is visible to query i when kv_offset + j <= q_offset + i; full:
//   every key is. Today's training runs are causal with both offsets 0 and Tq = Tk. A query row
//   that sees no key gets out = 0 and lse = -inf (what merging it with anything must ignore).
// lse is an output too: attention over the parts of a key range, merged by their lse
//   (ops/attention_merge), equals attention over the whole range, and its backward takes the
//   lse's gradient dlse (undefined: zero).
// Accumulation: every gradient here is an activation gradient, so dq, dk and dv are written (=).
// Compute precision (AttentionArgs::compute; the tensors stay f32 either way):
//   f32:  every product in f32 from the f32 values.
//   bf16: what a flash kernel does on bf16 q/k/v under PyTorch's bf16 autocast. With bf16(x) the
//     f32 -> bf16 rounding (nearest even) and every product an f32 accumulation of exact
//     products of bf16 operands:
//     forward:  S = scale * bf16(q) bf16(k)^T; max, sum and lse stay f32;
//               o_i = sum_j bf16(exp(S_ij - c_i)) bf16(v_j) / sum_j exp(S_ij - c_i), where c_i is
//               any multiple of ln 2 at or above the row max (bf16 rounding commutes with a power
//               of two, so this is the rounding of exp(S_ij) itself, scaled into range: the
//               kernel's online softmax keeps c a multiple of ln 2 so its rescaling is exact);
//     backward: dO is rounded, dP = bf16(dO) bf16(v)^T, D_i = bf16(dO_i) . o_i,
//               P = exp(S - lse) and dS = P (dP - D) in f32, then
//               dv = bf16(P)^T bf16(dO), dq = scale bf16(dS) bf16(k), dk = scale bf16(dS)^T bf16(q).
//     The reference rounds at the same places, so kernel and reference differ by summation order
//     (which can flip a rounding of P or dS by one bf16 ulp: see attention.md for the tolerance).
// Derivation of the forward (online softmax) and the backward, and the CPU tiling: attention.md.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

enum class AttentionMask { causal, full };

struct AttentionArgs {
  float scale = 0.0f;          // 0 means 1 / sqrt(K)
  DType compute = DType::f32;  // f32 or bf16: the rounding rule above
  // bf16 only: take the kernel's emulated branch (bf16-rounded values in f32, f32 FMAs) even where
  // the CPU has bf16 dot products. The same numbers up to summation order; for tests and benches.
  bool emulate_bf16 = false;
  AttentionMask mask = AttentionMask::causal;
  int64_t q_offset = 0;   // sequence position of query row 0
  int64_t kv_offset = 0;  // sequence position of key row 0
};

struct AttentionSaved {
  Tensor lse_BHT;  // f32
};

// Throws naming the tensor and the expected shape.
void check_attention(const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK);

// Keys [0, n) of a key range are the ones query row i sees under args' mask (causal visibility is
// a prefix of the keys): clamp(q_offset + i - kv_offset + 1, 0, tk), or tk for a full mask.
int64_t attention_visible_keys(const AttentionArgs& args, int64_t i, int64_t tk);

// out_BTHK is written; saved.lse_BHT is allocated when undefined or of the wrong size.
void attention_forward(const AttentionArgs& args, const Tensor& q_BTHK, const Tensor& k_BTGK,
                       const Tensor& v_BTGK, Tensor& out_BTHK, AttentionSaved& saved);
// dq_BTHK, dk_BTGK and dv_BTGK are written (=). dlse_BHT: the gradient of saved.lse_BHT as an
// output (undefined: zero, the case of attention that is not merged).
void attention_backward(const AttentionArgs& args, const Tensor& dout_BTHK, const Tensor& dlse_BHT,
                        const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK,
                        const Tensor& out_BTHK, const AttentionSaved& saved, Tensor& dq_BTHK,
                        Tensor& dk_BTGK, Tensor& dv_BTGK);

// The scale actually used: args.scale, or 1 / sqrt(K) when it is 0.
float attention_scale(const AttentionArgs& args, int64_t head_dim);

using AttentionImpl =
    OpImpl<bool (*)(const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK),
           void (*)(const AttentionArgs&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                    AttentionSaved&),
           void (*)(const AttentionArgs&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                    const Tensor&, const Tensor&, const AttentionSaved&, Tensor&, Tensor&, Tensor&)>;
OpTable<AttentionImpl>& attention_table();
AttentionImpl attention_impl_ref();
AttentionImpl attention_impl_cpu();
// Whether the CPU kernel runs bf16 compute on bf16 tiles (oneDNN's AVX-512-BF16 matmul) rather than
// bf16-rounded tiles on f32 FMAs (no bf16 matmul, or AMX: attention_cpu.cpp says why).
bool attention_cpu_bf16_tiles();

namespace ref {
// Sizes for the scalar reference: q [b, tq, h, k], k [b, tk, g, k], v [b, tk, g, kv],
// out [b, tq, h, kv], lse [b, h, tq].
struct AttentionSizes {
  int64_t b, tq, tk, h, g, k, kv;
};
// Scalar reference over raw row-major arrays; `scale` is the resolved scale, the mask and the
// compute rule (bf16: the rounding rule above, products then exact and summed in double) are
// args'. Instantiated for float and double (the double instance is what the finite-difference
// check differentiates). O(Tk) scratch per query row. dlse may be null (zero).
template <class T>
void attention_forward(const AttentionSizes& n, double scale, const AttentionArgs& args, const T* q,
                       const T* key, const T* v, T* out, T* lse);
template <class T>
void attention_backward(const AttentionSizes& n, double scale, const AttentionArgs& args, const T* dout,
                        const T* dlse, const T* q, const T* key, const T* v, const T* out, const T* lse,
                        T* dq, T* dkey, T* dv);
}  // namespace ref

}  // namespace titan::ops
