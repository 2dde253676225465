// Whole-row moves of f32 [rows, D] tensors: gather by an index list (and its gradient, the
// scatter), every step-th row (a decoder's last token per sequence), and zeroing masked rows
// (vocabulary-parallel embedding: rows of ids another rank owns).
// Shapes: N rows of x, M rows of y, D elements per row (2-D, contiguous f32, one device).
//   index_M  i32 or i64 [M], every entry in [0, N)
//   mask_N   i32 [N]: nonzero marks a row to zero
//   rows_gather_forward:   y_MD[m] = x_ND[index_M[m]]                               (y written =)
//   rows_gather_backward:  dx_ND[index_M[m]] = dy_MD[m]                             (those rows =)
//     The entries of index_M must be distinct (a permutation or an injection, as MoE's
//     pair_of_row is); rows of dx that index_M does not name are left as they are, so a caller
//     whose index does not cover x zeroes dx first. With distinct entries this is the gradient
//     of the gather, copied rather than added, so no -0 + 0 changes a sign.
//   rows_strided_forward:  y_MD[m] = x_ND[start + m * step], start + (M - 1) * step < N  (=)
//   rows_transpose:        x_ND's rows as an [a, b] grid, y_ND the [b, a] grid:
//                          y_ND[j a + i] = x_ND[i b + j], N = a b  (a gather by that index; =)
//   rows_mask:             x_ND[n] = 0 for every n with mask_N[n] != 0 (in place). The mask is
//     linear and symmetric: its gradient is the same mask applied to dy, so it has no separate
//     backward.
// Every implementation moves bits (copies and zeros) only, so all give the same values.
#pragma once

#include <cstddef>
#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Each throws naming the tensor, what it expected and what it found.
void check_rows_gather(const Tensor& x_ND, const Tensor& index_M, const Tensor& y_MD);
void check_rows_strided(const Tensor& x_ND, int64_t start, int64_t step, const Tensor& y_MD);
void check_rows_mask(const Tensor& mask_N, const Tensor& x_ND);

void rows_gather_forward(const Tensor& x_ND, const Tensor& index_M, Tensor& y_MD);
void rows_gather_backward(const Tensor& dy_MD, const Tensor& index_M, Tensor& dx_ND);
void rows_strided_forward(const Tensor& x_ND, int64_t start, int64_t step, Tensor& y_MD);
void rows_transpose(const Tensor& x_ND, int64_t a, int64_t b, Tensor& y_ND);
void rows_mask(const Tensor& mask_N, Tensor& x_ND);

// (supports sees x only: the signature must differ from EmbeddingImpl's, the Kernel variant's
// alternatives are told apart by type.)
using RowsGatherImpl = OpImpl<bool (*)(const Tensor& x_ND),
                              void (*)(const Tensor& x_ND, const Tensor& index_M, Tensor& y_MD),
                              void (*)(const Tensor& dy_MD, const Tensor& index_M, Tensor& dx_ND)>;
using RowsStridedImpl = OpImpl<bool (*)(const Tensor& x_ND),
                               void (*)(const Tensor& x_ND, int64_t start, int64_t step, Tensor& y_MD),
                               std::nullptr_t>;  // generation only: nothing trains through it
struct RowsMaskTag;  // its function types are cast's
using RowsMaskImpl = OpImpl<bool (*)(const Tensor& mask_N, const Tensor& x_ND),
                            void (*)(const Tensor& mask_N, Tensor& x_ND), std::nullptr_t, RowsMaskTag>;

OpTable<RowsGatherImpl>& rows_gather_table();
OpTable<RowsStridedImpl>& rows_strided_table();
OpTable<RowsMaskImpl>& rows_mask_table();
RowsGatherImpl rows_gather_impl_ref();
RowsGatherImpl rows_gather_impl_cpu();
RowsStridedImpl rows_strided_impl_ref();
RowsStridedImpl rows_strided_impl_cpu();
RowsMaskImpl rows_mask_impl_ref();
RowsMaskImpl rows_mask_impl_cpu();

namespace ref {
// Scalar references over raw row-major arrays; instantiated for float and double (the double
// instance is what the finite-difference check differentiates) and int32_t / int64_t indices.
template <class T, class I>
void rows_gather_forward(int64_t m, int64_t d, const T* x, const I* index, T* y);
template <class T, class I>
void rows_gather_backward(int64_t m, int64_t d, const T* dy, const I* index, T* dx);
}  // namespace ref

}  // namespace titan::ops
