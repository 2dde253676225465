// Pre-norm decoder block: h = x + attention(attention_norm(x)); y = h + mlp(ffn_norm(h)), where
// the mlp is the dense SwiGLU feed_forward or, in a sparse layer, the mixture of experts `moe`.
// The block is the unit of activation checkpointing and of FSDP gathering. Its forward fills a
// Saved value that its backward consumes (llm.c's explicit activations): the modules hold
// parameters only, so any number of micro-batches can be in flight, and a block's Saved can be
// thinned or dropped and rebuilt by replaying the same kernels (bit-identical gradients).
#pragma once

#include <any>
#include <memory>
#include <string>
#include <vector>

#include "titan/nn/attention.h"
#include "titan/nn/feed_forward.h"
#include "titan/nn/moe.h"
#include "titan/nn/tensor_parallel.h"

namespace titan::nn {

// A container node (model.layers.<i>): titan builds the block from its children attention_norm,
// attention, ffn_norm and feed_forward (dense) or moe (sparse); the children are replaceable, the
// block itself is not.
class TransformerBlockConfig : public NodeConfig {
 public:
  static constexpr const char* kType = "TransformerBlock";
  std::vector<std::string> type_chain() const override { return {kType}; }
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
  // Each child's saved state is a value of that module's own type (std::any).
  struct Saved {
    Recompute recompute = Recompute::keep_all;
    Tensor x_ND, h_ND;  // the block's input and its residual after attention (the norms' inputs)
    std::any attention_norm, attention, ffn_norm, mlp;
  };

  // Built from the tree below build.path().
  explicit TransformerBlock(const ModuleBuild& build);

  // totals: routing statistics of a MoE block (see Moe::forward); never null here.
  Tensor forward(const StepContext& ctx, const Tensor& x_ND, Saved& saved, Recompute recompute,
                 RouterTotals* totals);
  Tensor backward(const StepContext& ctx, const Tensor& dy_ND, Saved& saved);  // returns dx_ND
  // Inference with a KV cache (see AttentionModule::forward_cached): the block on ctx.seq new
  // tokens per row, layer `layer`'s cache appended to; nothing saved, no routing statistics.
  Tensor forward_cached(const StepContext& ctx, const Tensor& x_ND, KvCache& cache, int64_t layer);
  void collect(ParameterList& out);
  void collect_buffers(ParameterList& out);
  // Every child's shape constraints (plugin modules declare theirs); throws the first violation.
  void check(int64_t batch, int64_t seq) const;
  // Tensor parallel: attention and feed-forward are TP regions (their modules built with this
  // rank's heads / FFN columns); x and y are this rank's tokens under sequence parallelism. Not owned.
  void set_tensor_parallel(TensorParallelOps* tp) { tp_ = tp; }

  std::unique_ptr<RmsNormModule> attention_norm;
  std::unique_ptr<AttentionModule> attention;
  std::unique_ptr<RmsNormModule> ffn_norm;
  std::unique_ptr<FeedForwardModule> feed_forward;  // exactly one of these two
  std::unique_ptr<MoeModule> moe;

 private:
  Tensor run(const StepContext& ctx, const Tensor& x_ND, Saved& s, RouterTotals* totals);
  void drop_recomputable(Saved& s) const;
  void recompute(const StepContext& ctx, Saved& s);
  Tensor enter(const Tensor& x_ND) { return tp_ ? tp_->enter(x_ND) : x_ND; }

  TensorParallelOps* tp_ = nullptr;
};

}  // namespace titan::nn
