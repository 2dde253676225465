// Token embedding: ids (any shape, N ids) -> x_ND. The table may be shared with the output head
// (tied embeddings); then its gradient receives both contributions.
#pragma once

#include "titan/nn/parameter.h"

namespace titan::nn {

struct EmbeddingConfig {
  int64_t vocab_size = 0;
  int64_t dim = 0;
};

class Embedding {
 public:
  Embedding(const EmbeddingConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& ids);
  void backward(const Tensor& dy_ND);  // accumulates dweight
  void collect(ParameterList& out) { out.push_back(&weight); }
  // Vocabulary-parallel: this table holds ids [start, start + vocab_size); the others look up
  // zero rows (another rank holds them) and get no gradient.
  void set_vocab_start(int64_t start) { vocab_start_ = start; }
  void release() { ids_ = Tensor(); }

  Parameter weight;  // [vocab, dim]

 private:
  EmbeddingConfig config_;
  Tensor ids_;
  int64_t vocab_start_ = -1;  // -1: the whole vocabulary
  Tensor outside_;            // i32 [N] (vocabulary-parallel): 1 where the id is not in this table
};

}  // namespace titan::nn
