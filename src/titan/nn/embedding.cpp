#include "titan/nn/embedding.h"

#include "titan/ops/embedding/embedding.h"

namespace titan::nn {

Embedding::Embedding(const EmbeddingConfig& config, const std::string& fqn) : config_(config) {
  weight.init(fqn + ".weight", {config.vocab_size, config.dim});
}

Tensor Embedding::forward(const Tensor& ids) {
  Tensor y_ND = Tensor::empty({ids.numel(), config_.dim});
  ops::embedding_forward(ids, weight.value, y_ND);
  ids_ = ids;
  return y_ND;
}

void Embedding::backward(const Tensor& dy_ND) {
  ops::embedding_backward(ids_, dy_ND, weight.grad);
  release();
}

}  // namespace titan::nn
