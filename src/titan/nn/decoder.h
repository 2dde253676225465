// Decoder-only language model: embedding -> blocks -> final norm -> output head (tied to the
// embedding or its own weight). Loss = mean cross-entropy over non-ignored targets, computed by
// the fused lm_head + cross-entropy op so [tokens, vocab] logits never exist whole in training.
// Legend: B batch, T sequence, N = B*T tokens, D dim, V vocab.
#pragma once

#include <memory>
#include <vector>

#include "titan/nn/embedding.h"
#include "titan/nn/transformer_block.h"

namespace titan::nn {

struct DecoderConfig {
  int64_t vocab_size = 0;
  int64_t dim = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t hidden_dim = 0;  // FFN
  float norm_eps = 1e-6f;
  float rope_theta = 1e6f;
  bool tie_embeddings = false;
  bool attention_bias = false;  // q/k/v/o biases (HF attention_bias: Qwen3, Llama)
  bool qk_norm = true;
  int64_t max_seq_len = 4096;
  bool qkv_bias = false;  // q/k/v biases without an o bias (Qwen2); attention_bias implies them
  bool mlp_bias = false;  // gate/up/down biases (HF Llama mlp_bias)

  // Throws a one-line error for impossible sizes (e.g. heads not divisible by kv heads).
  void validate() const;
  // Parameter counts (the tied table counted once).
  int64_t num_params() const;
  int64_t num_embedding_params() const { return vocab_size * dim; }
};

struct LossResult {
  double loss = 0.0;        // mean over num_targets (0 when there are none)
  double loss_sum = 0.0;
  int64_t num_targets = 0;
};

class Decoder {
 public:
  explicit Decoder(const DecoderConfig& config);

  const DecoderConfig& config() const { return config_; }
  // Every parameter once (the tied table appears as tok_embeddings.weight only).
  ParameterList parameters();
  void zero_grad();

  // Forward + backward of mean cross-entropy. ids_BT / targets_BT: i64 [B, T]; targets already
  // aligned with positions (target t is what position t predicts; -100 = ignored). Gradients
  // accumulate into the parameters' grads, scaled by grad_scale (default 1/num_targets).
  LossResult forward_backward(const Tensor& ids_BT, const Tensor& targets_BT,
                              float grad_scale = 0.0f);
  // Forward-only mean cross-entropy (no gradients, no saved activations).
  LossResult forward_loss(const Tensor& ids_BT, const Tensor& targets_BT);
  // Inference forward: logits f32 [B, T, V] (materialized: this is the output).
  Tensor forward_logits(const Tensor& ids_BT);

  Embedding tok_embeddings;
  std::vector<std::unique_ptr<TransformerBlock>> layers;
  RmsNorm norm;
  std::unique_ptr<Linear> output;  // null when tied

  // The head's weight: output.weight, or tok_embeddings.weight when tied.
  Parameter& head_weight() { return output ? output->weight : tok_embeddings.weight; }
  // Drops every saved activation (after an inference forward).
  void release();

 private:
  StepContext make_context(const Tensor& ids_BT) const;
  Tensor forward_hidden(const StepContext& ctx, const Tensor& ids_BT);

  DecoderConfig config_;
};

}  // namespace titan::nn
