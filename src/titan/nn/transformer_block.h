// Pre-norm decoder block: h = x + attention(attention_norm(x)); y = h + mlp(ffn_norm(h)), where
// the mlp is the dense SwiGLU feed_forward or, in a sparse layer, the mixture of experts `moe`.
// The block is the unit of activation checkpointing and of FSDP gathering. Its forward fills a
// Saved value that its backward consumes (llm.c's explicit activations): the modules hold
// parameters only, so any number of micro-batches can be in flight, and a block's Saved can be
// thinned or dropped and rebuilt by replaying the same kernels (bit-identical gradients).
#pragma once

#include <any>
#include <memory>
#include <optional>
#include <string>
#include <vector>

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

// What a block's forward keeps for its backward (activation checkpointing, torchtitan's modes):
//   keep_all    every module's saved tensors
//   keep_ops    the outputs of the expensive ops (GEMMs, attention) and the block's input and
//               residual; norms, RoPE and SwiGLU outputs are recomputed in backward (selective "op")
//   keep_input  only the block's input; backward replays the whole forward first (full)
enum class Recompute { keep_all, keep_ops, keep_input };

// torchtitan's activation_checkpoint.mode (none | full | selective) and selective_ac_option ("op",
// or an integer N: every N-th block fully checkpointed, counting from 1 as torchtitan does; 0 or 1:
// every block) as one choice per layer. Throws a one-line error naming the field for other values.
std::vector<Recompute> recompute_per_layer(const std::string& mode, const std::string& selective_ac_option,
                                           int64_t num_layers);

class TransformerBlock {
 public:
  struct Saved {
    Recompute recompute = Recompute::keep_all;
    Tensor x_ND;  // keep_input: the block's input, all that is kept
    RmsNorm::Saved attention_norm, ffn_norm;
    Attention::Saved attention;
    std::any feed_forward;  // the feed-forward module's own Saved
    Moe::Saved moe;
  };

  TransformerBlock(const TransformerBlockConfig& config, const std::string& fqn);

  // totals: routing statistics of a MoE block (see Moe::forward); never null here.
  Tensor forward(const StepContext& ctx, const Tensor& x_ND, Saved& saved, Recompute recompute,
                 RouterTotals* totals);
  Tensor backward(const StepContext& ctx, const Tensor& dy_ND, Saved& saved);  // returns dx_ND
  void collect(ParameterList& out);
  void collect_buffers(ParameterList& out);
  // Tensor parallel: attention and feed-forward are TP regions (their modules built with this
  // rank's heads / FFN columns); x and y are this rank's tokens under sequence parallelism. Not owned.
  void set_tensor_parallel(TensorParallelOps* tp) { tp_ = tp; }

  RmsNorm attention_norm;
  Attention attention;
  RmsNorm ffn_norm;
  std::unique_ptr<FeedForwardModule> feed_forward;  // exactly one of these two
  std::unique_ptr<Moe> moe;

 private:
  Tensor run(const StepContext& ctx, const Tensor& x_ND, Saved& s, RouterTotals* totals);
  void drop_recomputable(Saved& s) const;
  void recompute(const StepContext& ctx, Saved& s);
  Tensor enter(const Tensor& x_ND) { return tp_ ? tp_->enter(x_ND) : x_ND; }

  TensorParallelOps* tp_ = nullptr;
};

}  // namespace titan::nn
