#include "titan/nn/embedding.h"

#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/embedding/embedding.h"
#include "titan/ops/local_ids/local_ids.h"
#include "titan/ops/rows/rows.h"

namespace titan::nn {

Embedding::Embedding(const EmbeddingConfig& config, const std::string& fqn) : config_(config) {
  weight.init(fqn + ".weight", {config.vocab_size, config.dim}, parameter_device());
}

Tensor Embedding::forward(const Tensor& ids, std::any& any) const {
  Saved& saved = any.emplace<Saved>();
  // bf16 compute: bf16(table)[id] == bf16(table[id]), so the f32 rows are looked up and rounded
  // (casting the whole table would cost V x D x 2 bytes for N rows); a bf16 table (a compute copy)
  // is looked up directly.
  const Tensor table_VD = weight.value.defined() ? weight.value : weight.for_compute();
  const bool round_rows = weight.compute_dtype == DType::bf16 && table_VD.dtype() == DType::f32;
  Tensor y_ND = Tensor::empty({ids.numel(), config_.dim}, DType::f32, table_VD.device());
  if (vocab_start_ < 0) {
    ops::embedding_forward(ids, table_VD, y_ND);
    // A frozen table read in place from the model folder's file (models/decoder/weights.cpp) needs
    // only the batch's rows, but Linux maps whole large folios (MiBs) around each row read: handing
    // them back after the lookup keeps only what the next lookup reads resident (else ~40% of
    // Qwen3-8B's 1.16 GiB table for one 2048-token batch). Backward never reads a frozen table.
    if (!weight.trainable) table_VD.release_file_pages();
    saved.ids = ids;
    return round_rows ? ops::cast_to(ops::cast_to(y_ND, DType::bf16), DType::f32) : y_ND;
  }
  // Local ids (an outside id looks up row 0, then its row is zeroed; its gradient is dropped).
  const int64_t n = ids.numel();
  Tensor local = Tensor::empty(ids.shape(), DType::i64, ids.device());
  saved.outside_N = Tensor::empty({n}, DType::i32, ids.device());
  ops::local_ids_forward({vocab_start_, config_.vocab_size}, ids.contiguous(), local, saved.outside_N);
  ops::embedding_forward(local, table_VD, y_ND);
  if (!weight.trainable) table_VD.release_file_pages();  // as above
  ops::rows_mask(saved.outside_N, y_ND);
  saved.ids = local;
  return round_rows ? ops::cast_to(ops::cast_to(y_ND, DType::bf16), DType::f32) : y_ND;
}

void Embedding::backward(const Tensor& dy_ND, std::any& any) {
  Saved& saved = std::any_cast<Saved&>(any);
  if (!weight.grad.defined()) {  // frozen table: nothing to accumulate
    any.reset();
    return;
  }
  if (!saved.outside_N.defined()) {
    ops::embedding_backward(saved.ids, dy_ND, weight.grad);
    any.reset();
    return;
  }
  Tensor dy = dy_ND.clone();
  ops::rows_mask(saved.outside_N, dy);  // the mask's gradient is the mask
  ops::embedding_backward(saved.ids, dy, weight.grad);
  any.reset();
}

}  // namespace titan::nn
