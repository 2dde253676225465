// Pre-norm decoder block: h = x + attention(attention_norm(x)); y = h + feed_forward(ffn_norm(h)).
// The block is the unit of activation checkpointing and (later) FSDP gathering.
#pragma once

#include "titan/nn/attention.h"
#include "titan/nn/feed_forward.h"

namespace titan::nn {

struct TransformerBlockConfig {
  AttentionConfig attention;
  FeedForwardConfig feed_forward;
  float norm_eps = 1e-6f;
};

class TransformerBlock {
 public:
  TransformerBlock(const TransformerBlockConfig& config, const std::string& fqn);

  Tensor forward(const StepContext& ctx, const Tensor& x_ND);
  Tensor backward(const StepContext& ctx, const Tensor& dy_ND);  // returns dx_ND
  void collect(ParameterList& out);
  void release();

  RmsNorm attention_norm;
  Attention attention;
  RmsNorm ffn_norm;
  FeedForward feed_forward;
};

}  // namespace titan::nn
