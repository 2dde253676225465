// Pre-norm decoder block: h = x + attention(attention_norm(x)); y = h + mlp(ffn_norm(h)), where
// the mlp is the dense SwiGLU feed_forward or, in a sparse layer, the mixture of experts `moe`.
// The block is the unit of activation checkpointing and (later) FSDP gathering.
#pragma once

#include <memory>
#include <optional>

#include "titan/nn/attention.h"
#include "titan/nn/feed_forward.h"
#include "titan/nn/moe.h"
#include "titan/nn/tensor_parallel.h"

namespace titan::nn {

struct TransformerBlockConfig {
  AttentionConfig attention;
  FeedForwardConfig feed_forward;  // used when moe is empty
  std::optional<MoeConfig> moe;
  float norm_eps = 1e-6f;
};

class TransformerBlock {
 public:
  TransformerBlock(const TransformerBlockConfig& config, const std::string& fqn);

  Tensor forward(const StepContext& ctx, const Tensor& x_ND);
  Tensor backward(const StepContext& ctx, const Tensor& dy_ND);  // returns dx_ND
  void collect(ParameterList& out);
  void collect_buffers(ParameterList& out);
  void release();
  // Tensor parallel: attention and feed-forward are TP regions (their modules built with this
  // rank's heads / FFN columns); x and y are this rank's tokens under sequence parallelism. Not owned.
  void set_tensor_parallel(TensorParallelOps* tp) { tp_ = tp; }

  RmsNorm attention_norm;
  Attention attention;
  RmsNorm ffn_norm;
  std::unique_ptr<FeedForwardModule> feed_forward;  // exactly one of these two
  std::unique_ptr<Moe> moe;

 private:
  TensorParallelOps* tp_ = nullptr;
};

}  // namespace titan::nn
