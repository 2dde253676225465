// Rotary position embedding, Hugging Face rotate-half convention (Qwen3 / Llama
// apply_rotary_pos_emb). With K = head_dim and i in [0, K/2):
//   inv_freq[i] = 1 / theta^(2i / K),  angle[n, i] = position[n] * inv_freq[i]
//   y[i]       = x[i] * cos - x[i + K/2] * sin
//   y[i + K/2] = x[i + K/2] * cos + x[i] * sin
// i.e. y = x * cat(cos, cos) + rotate_half(x) * cat(sin, sin), rotate_half(x) = cat(-x2, x1):
// each pair (x[i], x[i + K/2]) is rotated by angle[n, i].
// Shapes: N tokens (B*T), H heads, K head_dim; K2 = K/2.
//   positions_N (i64, any shape read flat) -> tables cos_NK2, sin_NK2 (f32 [N, K2]);
//   x_NHK (contiguous f32 [..., H, L]; the leading dims flatten to N rows) -> y_NHK. L >= K: with
//   L > K (partial rotary, HF partial_rotary_factor = K / L) the first K lanes of each head rotate
//   and lanes K .. L-1 pass through unchanged.
// Saved: none beyond the tables, which are computed once per step and shared by every layer.
// Accumulation: activation grad only, written (=). y may alias x and dx may alias dy (in place).
// The backward is the transpose, a rotation by -angle: rope.md.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"
#include "titan/ops/rope/rope_scaling.h"

namespace titan::ops {

struct RopeArgs {
  float theta = 1e6f;  // Qwen3's rope_theta
  RopeScaling scaling;  // HF rope_type and its parameters (rope_scaling.h); default: none
};

struct RopeTables {
  Tensor cos_NK2;  // f32 [N, K/2]
  Tensor sin_NK2;  // f32 [N, K/2]
  int64_t head_dim = 0;
};

// Angles in double, cos/sin rounded to f32; inv_freq and the factor on cos/sin from
// rope_frequencies(theta, head_dim, scaling, max(position) + 1). Throws if head_dim is odd or not
// positive.
RopeTables rope_tables(const RopeArgs& args, const Tensor& positions_N, int64_t head_dim);

// Throws naming the tensor and the expected shape: x must be contiguous f32 with ndim >= 3,
// last dim K == tables.head_dim, and numel / (H * K) == the tables' rows.
void check_rope(const RopeTables& tables, const Tensor& x_NHK);

void rope_forward(const RopeTables& tables, const Tensor& x_NHK, Tensor& y_NHK);
void rope_backward(const RopeTables& tables, const Tensor& dy_NHK, Tensor& dx_NHK);

using RopeImpl = OpImpl<bool (*)(const RopeTables& tables, const Tensor& x_NHK),
                        void (*)(const RopeTables&, const Tensor&, Tensor&),
                        void (*)(const RopeTables&, const Tensor&, Tensor&)>;
OpTable<RopeImpl>& rope_table();
RopeImpl rope_impl_ref();
RopeImpl rope_impl_cpu();

namespace ref {
// Scalar reference over raw row-major arrays; instantiated for float and double (the double
// instance is what the finite-difference check differentiates). y may alias x, dx may alias dy.
template <class T>
void rope_tables(double theta, int64_t n, int64_t k, const int64_t* positions, T* cos, T* sin);
// The same from given frequencies: cos = cos(position * inv_freq[i]) * attention_factor (and sin).
template <class T>
void rope_tables(const double* inv_freq, double attention_factor, int64_t n, int64_t k, const int64_t* positions,
                 T* cos, T* sin);
// lanes: of each head (> k: partial rotary, the first k rotated, the rest copied); 0: k.
template <class T>
void rope_forward(int64_t n, int64_t h, int64_t k, const T* cos, const T* sin, const T* x, T* y, int64_t lanes = 0);
template <class T>
void rope_backward(int64_t n, int64_t h, int64_t k, const T* cos, const T* sin, const T* dy, T* dx,
                   int64_t lanes = 0);
}  // namespace ref

}  // namespace titan::ops
