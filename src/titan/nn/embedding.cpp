#include "titan/nn/embedding.h"

#include <algorithm>

#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/embedding/embedding.h"

namespace titan::nn {

Embedding::Embedding(const EmbeddingConfig& config, const std::string& fqn) : config_(config) {
  weight.init(fqn + ".weight", {config.vocab_size, config.dim}, kParameterDevice);
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
    saved.ids = ids;
    return round_rows ? ops::cast_to(ops::cast_to(y_ND, DType::bf16), DType::f32) : y_ND;
  }
  // Local ids (an outside id looks up row 0, then its row is zeroed; its gradient is dropped).
  const int64_t n = ids.numel();
  Tensor local = Tensor::empty(ids.shape(), DType::i64, Device::cpu);  // ids are remapped on the host
  saved.outside_N = Tensor::zeros({n}, DType::i32, Device::cpu);
  const int64_t* id = ids.contiguous().data<int64_t>();
  int64_t* l = local.data<int64_t>();
  int32_t* out = saved.outside_N.data<int32_t>();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t j = id[i] - vocab_start_;
    out[i] = j < 0 || j >= config_.vocab_size;
    l[i] = out[i] ? 0 : j;
  }
  ops::embedding_forward(local, table_VD, y_ND);
  float* y = y_ND.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    if (out[i]) std::fill(y + i * config_.dim, y + (i + 1) * config_.dim, 0.0f);
  }
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
  float* d = dy.data<float>();
  const int32_t* out = saved.outside_N.data<int32_t>();
  for (int64_t i = 0; i < saved.outside_N.numel(); ++i) {
    if (out[i]) std::fill(d + i * config_.dim, d + (i + 1) * config_.dim, 0.0f);
  }
  ops::embedding_backward(saved.ids, dy, weight.grad);
  any.reset();
}

}  // namespace titan::nn
