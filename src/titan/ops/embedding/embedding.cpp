// Contract checks and dispatch.
#include "titan/ops/embedding/embedding.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

template <class Id>
static void check_ids_in_range(const Id* ids, int64_t n, int64_t v) {
  for (int64_t i = 0; i < n; ++i) {
    TITAN_CHECK(ids[i] >= 0 && ids[i] < v, "[embedding] ids: id ", static_cast<int64_t>(ids[i]),
                " at index ", i, " is outside [0, ", v, "), the ", v,
                " rows of the table. HINT: the data was tokenized with a larger vocab than "
                "model.vocab_size, or the token file is corrupt");
  }
}

void check_embedding(const Tensor& ids_N, const Tensor& table_VD) {
  TITAN_CHECK((ids_N.dtype() == DType::i64 || ids_N.dtype() == DType::i32) && ids_N.is_contiguous(),
              "[embedding] ids: expected a contiguous i64 or i32 tensor, got ", ids_N.describe());
  TITAN_CHECK(table_VD.ndim() == 2 && (table_VD.dtype() == DType::f32 || table_VD.dtype() == DType::bf16) &&
                  table_VD.is_contiguous(),
              "[embedding] table: expected a contiguous f32 or bf16 [V, D] tensor, got ", table_VD.describe());
  const int64_t n = ids_N.numel(), v = table_VD.size(0);
  if (ids_N.is_meta()) return;  // the range check reads the ids
  if (ids_N.dtype() == DType::i64) {
    check_ids_in_range(ids_N.data<int64_t>(), n, v);
  } else {
    check_ids_in_range(ids_N.data<int32_t>(), n, v);
  }
}

OpTable<EmbeddingImpl>& embedding_table() {
  return builtin_table<EmbeddingImpl>("embedding", register_builtin_embedding);
}

// y_ND / dy_ND: contiguous f32 [numel(ids), D].
static void check_rows(const char* what, const Tensor& t, const Tensor& ids_N, int64_t d) {
  TITAN_CHECK(t.ndim() == 2 && t.size(0) == ids_N.numel() && t.size(1) == d &&
                  t.dtype() == DType::f32 && t.is_contiguous(),
              "[embedding] ", what, ": expected contiguous f32[", ids_N.numel(), ", ", d,
              "] (one row per id), got ", t.describe(), ". HINT: ids ", ids_N.describe(),
              " are read flat; reshape ", what, " to [numel(ids), D]");
}

void embedding_forward(const Tensor& ids_N, const Tensor& table_VD, Tensor& y_ND) {
  OpTimer timer("embedding_forward");
  check_embedding(ids_N, table_VD);
  check_rows("y", y_ND, ids_N, table_VD.size(1));
  embedding_table().select(table_VD.device(), ids_N, table_VD).forward(ids_N, table_VD, y_ND);
}

void embedding_backward(const Tensor& ids_N, const Tensor& dy_ND, Tensor& dtable_VD) {
  OpTimer timer("embedding_backward");
  check_embedding(ids_N, dtable_VD);
  check_rows("dy", dy_ND, ids_N, dtable_VD.size(1));
  embedding_table().select(dtable_VD.device(), ids_N, dtable_VD).backward(ids_N, dy_ND, dtable_VD);
}

}  // namespace titan::ops
