// Token embedding lookup (HF nn.Embedding): y[i, :] = table[ids[i], :].
// Shapes: N ids (any shape, e.g. [B, T], read flat as numel() ids), V vocab rows, D features.
//   ids_N (i64 or i32, contiguous), table_VD (f32, or bf16 on the bf16 compute path: rows are
//   widened, exactly) -> y_ND (f32 [N, D]).
// Saved: none (backward needs only the ids).
// Accumulation: dtable is a parameter grad, accumulated (+=): a scatter-add of the dy rows, in
// id order, deterministic (no atomics). Ids are checked to lie in [0, V) at the boundary.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Throws naming the tensor and the expected shape; also for the first id outside [0, V).
void check_embedding(const Tensor& ids_N, const Tensor& table_VD);

void embedding_forward(const Tensor& ids_N, const Tensor& table_VD, Tensor& y_ND);
void embedding_backward(const Tensor& ids_N, const Tensor& dy_ND, Tensor& dtable_VD);

using EmbeddingImpl = OpImpl<bool (*)(const Tensor& ids_N, const Tensor& table_VD),
                             void (*)(const Tensor&, const Tensor&, Tensor&),
                             void (*)(const Tensor&, const Tensor&, Tensor&)>;
OpTable<EmbeddingImpl>& embedding_table();
EmbeddingImpl embedding_impl_ref();
EmbeddingImpl embedding_impl_cpu();

namespace ref {
// Scalar reference over raw row-major arrays; T is float or double, Id is int32_t or int64_t.
// Ids must already lie in [0, V).
template <class T, class Id>
void embedding_forward(int64_t n, int64_t d, const Id* ids, const T* table, T* y);
template <class T, class Id>
void embedding_backward(int64_t n, int64_t d, const Id* ids, const T* dy, T* dtable);
}  // namespace ref

}  // namespace titan::ops
