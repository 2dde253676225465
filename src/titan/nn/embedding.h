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
  struct Saved {
    Tensor ids;       // i64 [N], local to this table's rows under vocabulary parallelism
    Tensor outside_N;  // i32 [N] (vocabulary-parallel only): 1 where the id is not in this table
  };

  Embedding(const EmbeddingConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& ids, Saved& saved) const;
  void backward(const Tensor& dy_ND, Saved& saved);  // accumulates dweight; empties `saved`
  void collect(ParameterList& out) { out.push_back(&weight); }
  // Vocabulary-parallel: this table holds ids [start, start + vocab_size); the others look up
  // zero rows (another rank holds them) and get no gradient.
  void set_vocab_start(int64_t start) { vocab_start_ = start; }

  Parameter weight;  // [vocab, dim]

 private:
  EmbeddingConfig config_;
  int64_t vocab_start_ = -1;  // -1: the whole vocabulary
};

}  // namespace titan::nn
