// Token embedding: ids (any shape, N ids) -> x_ND; the Embedding node kind (model.tok_embeddings).
// The table may be shared with the output head (tied embeddings); then its gradient receives both
// contributions.
#pragma once

#include <any>

#include "titan/nn/module.h"

namespace titan::nn {

class EmbeddingConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "Embedding";
  EmbeddingConfig() = default;
  EmbeddingConfig(int64_t vocab_size_, int64_t dim_) : vocab_size(vocab_size_), dim(dim_) {}
  std::vector<std::string> type_chain() const override { return {kType}; }

  int64_t vocab_size = 0;
  int64_t dim = 0;
};

class EmbeddingModule : public Module {
 public:
  static constexpr const char* kKind = "Embedding";
  virtual Tensor forward(const Tensor& ids, std::any& saved) const = 0;
  virtual void backward(const Tensor& dy_ND, std::any& saved) = 0;  // accumulates into the table's grad
  // The table [vocab, dim] (the tied head reads it).
  virtual Parameter& table() = 0;
  // Vocabulary-parallel: this table holds ids [start, start + vocab_size); the others look up
  // zero rows (another rank holds them) and get no gradient. -1: the whole vocabulary.
  virtual void set_vocab_start(int64_t start) = 0;
};

class Embedding : public EmbeddingModule {
 public:
  struct Saved {
    Tensor ids;        // i64 [N], local to this table's rows under vocabulary parallelism
    Tensor outside_N;  // i32 [N] (vocabulary-parallel only): 1 where the id is not in this table
  };

  Embedding(const EmbeddingConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& ids, std::any& saved) const override;
  void backward(const Tensor& dy_ND, std::any& saved) override;
  void collect(ParameterList& out) override { out.push_back(&weight); }
  Parameter& table() override { return weight; }
  void set_vocab_start(int64_t start) override { vocab_start_ = start; }
  std::string describe() const override { return "embedding (built-in)"; }

  Parameter weight;  // [vocab, dim]

 private:
  EmbeddingConfig config_;
  int64_t vocab_start_ = -1;
};

}  // namespace titan::nn
