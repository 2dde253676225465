// Decoder-only language model: embedding -> blocks -> final norm -> output head (tied to the
// embedding or its own weight). Its loss is a list of named terms (nn/loss_terms.h): the mean
// cross-entropy over non-ignored targets, computed by the fused lm_head + cross-entropy op so
// [tokens, vocab] logits never exist whole in training, and HF's MoE load-balancing loss where
// aux-loss balancing is on.
// Legend: B batch, T sequence, N = B*T tokens, D dim, V vocab.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "titan/nn/config_tree.h"
#include "titan/nn/embedding.h"
#include "titan/nn/head.h"
#include "titan/nn/loss_terms.h"
#include "titan/nn/transformer_block.h"
#include "titan/ops/rope/rope_scaling.h"

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
  ops::RopeScaling rope_scaling;  // HF rope_type (linear, dynamic, yarn, llama3, longrope) and parameters
  bool tie_embeddings = false;
  bool attention_bias = false;  // q/k/v/o biases (HF attention_bias: Qwen3, Llama)
  bool qk_norm = true;
  int64_t max_seq_len = 4096;
  bool qkv_bias = false;  // q/k/v biases without an o bias (Qwen2); attention_bias implies them
  bool mlp_bias = false;  // gate/up/down biases (HF Llama mlp_bias)

  // Mixture of experts (HF Qwen3MoeConfig). num_experts = 0: every layer is dense. Layer i is
  // sparse when num_experts > 0, i is not in mlp_only_layers and (i + 1) % decoder_sparse_step
  // == 0; the others use the dense hidden_dim FFN.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;  // top_k
  int64_t moe_hidden_dim = 0;       // each expert's FFN width (moe_intermediate_size)
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  LoadBalance load_balance = LoadBalance::none;
  float router_aux_loss_coef = 0.001f;  // aux_loss: loss += coef * aux
  float bias_update_rate = 1e-3f;       // bias: torchtitan's load_balance_coeff
  int64_t shared_expert_dim = 0;        // Qwen3.5 MoE's shared expert width (0: none)

  // Qwen3.5 (HF Qwen3_5TextConfig). layer_types: one entry per layer, "full_attention" or
  // "linear_attention" (gated DeltaNet, nn/gated_delta_net.h); empty: every layer full attention.
  std::vector<std::string> layer_types;
  int64_t linear_num_key_heads = 0, linear_key_head_dim = 0;
  int64_t linear_num_value_heads = 0, linear_value_head_dim = 0;
  int64_t linear_conv_kernel_dim = 4;
  float partial_rotary_factor = 1.0f;  // RoPE rotates the first head_dim * factor lanes of a head
  bool attn_output_gate = false;       // full attention's q_proj also yields a sigmoid gate on o
  bool zero_centered_norms = false;    // every RMSNorm but the DeltaNet's is x * (1 + w)

  // Throws a one-line error for impossible sizes (e.g. heads not divisible by kv heads).
  void validate() const;
  bool is_linear_attention_layer(int64_t layer) const;
  int64_t num_linear_attention_layers() const;
  int64_t rotary_dim() const;  // the lanes of a head RoPE rotates
  // One block's parameters apart from its MLP (attention or DeltaNet, and the block's two norms).
  double full_attention_params() const;
  double linear_attention_params() const;
  bool is_moe_layer(int64_t layer) const;
  int64_t num_moe_layers() const;
  // Parameter counts (the tied table counted once); active: each token's share (top_k experts).
  int64_t num_params() const;
  int64_t num_active_params() const;
  int64_t num_embedding_params() const { return vocab_size * dim; }
};

// The decoder's loss terms (nn/loss_terms.h; Decoder::loss_terms): cross-entropy, and HF's
// load-balancing loss with aux-loss balancing.
inline constexpr std::string_view kCrossEntropyTerm = "ce";
inline constexpr std::string_view kAuxLossTerm = "aux_loss";

// Tokens routed to each expert, over every MoE layer and expert (since the last reset).
struct ExpertLoad {
  int64_t min = 0;
  int64_t max = 0;
  bool defined = false;  // false for a dense model
};

// The root node ("model"): a container holding the whole model's config.
class DecoderNode : public NodeConfig {
 public:
  static constexpr const char* kType = "Decoder";
  explicit DecoderNode(const DecoderConfig& c) : config(c) {}
  std::vector<std::string> type_chain() const override { return {kType}; }
  DecoderConfig config;
};

// The config tree of a decoder, each node the config of its module: "model" (DecoderNode),
// "model.tok_embeddings" (EmbeddingConfig), "model.layers.<i>" (TransformerBlockConfig, a
// container) with .attention_norm / .ffn_norm (RmsNormConfig), .attention (AttentionConfig),
// .attention.wq / .wk / .wv / .wo (LinearConfig), .attention.q_norm / .k_norm (RmsNormConfig, with
// qk_norm), .attention.rope (RopeConfig), .feed_forward (FeedForwardConfig, its .w1 / .w2 / .w3
// LinearConfig) or .moe (MoeConfig); "model.norm" (RmsNormConfig),
// "model.output" (HeadConfig, tied or not).
ConfigTree decoder_config_tree(const DecoderConfig& config);
// Throws naming the first difference when `tree` is not `config`'s tree with leaf nodes replaced:
// a path added or missing, or a container (Decoder, TransformerBlock) of another type.
void check_decoder_tree(const DecoderConfig& config, const ConfigTree& tree);

// Called around each unit's use by forward_backward / forward_loss / forward_logits; FSDP
// (parallel/fsdp.h) gathers a unit's parameters and frees them again here. Unit kRoot is the
// embedding, the final norm and the head; unit i >= 0 is layers[i]. Per forward_backward:
//   before_forward(kRoot), [before_forward(i), after_forward(i)] for i = 0.., before_backward(kRoot)
//   (before the fused head, which writes the head's gradient), [before_backward(i),
//   after_backward(i)] for i = L-1..0, after_backward(kRoot).
// Forward-only calls end with after_forward(kRoot) instead of the backward half.
class UnitHooks {
 public:
  static constexpr int kRoot = -1;
  virtual ~UnitHooks() = default;
  virtual void before_forward(int unit) = 0;   // the unit's parameter values are needed
  virtual void after_forward(int unit) = 0;    // ... no longer (until its backward)
  virtual void before_backward(int unit) = 0;  // values and gradients (accumulated into) are needed
  virtual void after_backward(int unit) = 0;   // the unit's gradients of this micro-batch are complete
};

// Everything one micro-batch's forward keeps for its backward (llm.c's ActivationTensors): the
// step context and each module's Saved value. forward_backward makes one per micro-batch.
struct Activations {
  // Set by the caller before stage_forward, the micro-batch's view of its sequence: its tokens'
  // positions, i64 [B, T] (undefined: each row counts 0..T-1, today's training), and who attends
  // over the sequence when it is more than these tokens (null: nobody, nn/sequence_attention.h).
  Tensor positions_BT;
  SequenceAttention* sequence = nullptr;
  StepContext ctx;
  std::any tok_embeddings;
  std::vector<TransformerBlock::Saved> layers;
  std::any norm;
  RouterTotals router;  // every MoE layer's routing statistics (the aux loss reads them)
  Tensor head_input_ND;  // a pipeline's last stage: the final norm's output, kept for its backward
};

// One pipeline stage of a decoder that keeps only its pipeline part (keep_pipeline_part): kept
// layers [begin, end) (local indices), the embedding before them on the first stage, the final norm
// and the head after them on the last.
struct StageSpan {
  int64_t begin = 0;
  int64_t end = 0;
  bool first = false;
  bool last = false;
};

class Decoder {
 public:
  explicit Decoder(const DecoderConfig& config);
  // Built by walking `tree` (decoder_config_tree(config), possibly with nodes replaced by
  // overrides): every node by the module registered for its type (nn/module.h).
  Decoder(const DecoderConfig& config, const ConfigTree& tree);

  // Every module's shape constraints for micro-batches of [batch, seq] (plugin modules declare
  // theirs); throws the first violation. Called once before step 1.
  void check_shapes(int64_t batch, int64_t seq) const;
  // The paths of the nodes a plugin's module type built (their type is not one titan registered).
  const std::vector<std::string>& plugin_nodes() const { return plugin_nodes_; }

  const DecoderConfig& config() const { return config_; }
  // Every parameter once (the tied table appears as tok_embeddings.weight only).
  ParameterList parameters();
  void zero_grad();

  // The terms every LossResult of this decoder holds, in order, with zero sums: "ce" (the
  // cross-entropy's sum over targets, per target, weight 1) and, with aux-loss balancing,
  // "aux_loss" (HF's load-balancing loss of each forward, unscaled, per forward, weight
  // router_aux_loss_coef). The same on every rank of a job (each term's global sum is a collective).
  std::vector<LossTerm> loss_terms() const;
  // Forward + backward of the loss terms (nn/loss_terms.h). ids_BT / targets_BT: i64 [B, T];
  // targets already aligned with positions (target t is what position t predicts; -100 = ignored).
  // Gradients accumulate into the parameters' grads: the cross-entropy sum's scaled by grad_scale
  // (default 1/num_targets), a per-forward term's (the aux loss) by its weight * forward_scale
  // (1 / the forwards of a step when accumulating).
  // positions_BT: the tokens' positions, i64 [B, T] (undefined: 0..T-1 per row), as Activations'.
  LossResult forward_backward(const Tensor& ids_BT, const Tensor& targets_BT,
                              float grad_scale = 0.0f, float forward_scale = 1.0f,
                              const Tensor& positions_BT = Tensor());
  // Pipeline parallelism (parallel/pipeline.h). Drops every layer not in `layer_ids` (global
  // indices, ascending), the embedding unless `first`, the final norm and head unless `last`
  // (parameters keep their global FQNs; layers and the per-layer recompute choices then hold the
  // kept ones only, in order). Not with tied embeddings.
  void keep_pipeline_part(const std::vector<int64_t>& layer_ids, bool first, bool last);
  // One execution path: a span of the model (whole_span() for all of it, which forward_backward,
  // forward_loss and forward_logits run; a pipeline stage's part otherwise).
  // One stage of a micro-batch. Forward: the stage's output h_ND (hn_ND after the final norm on the
  // last stage, also kept in acts.head_input_ND); its input is ids_BT on the first stage, else h_ND
  // from the previous stage (ids_BT gives every stage the micro-batch's shape for its positions).
  // keep = false: an inference forward (nothing saved for a backward, as forward_loss).
  Tensor stage_forward(const Tensor& ids_BT, const Tensor& h_ND, const StageSpan& span, Activations& acts,
                       bool keep = true);
  // The last stage's forward-only loss on its output hn_ND (forward_loss's head; a collective over
  // tp under tensor parallelism): the cross-entropy term (the others 0).
  LossResult stage_loss(const Tensor& hn_ND, const Tensor& targets_BT, const StageSpan& span);
  // The span of everything this decoder holds: the whole model as one stage, or its pipeline part.
  StageSpan whole_span() const;
  // Backward: dh_ND is the gradient of the stage's output from the next stage; on the last stage the
  // head's cross-entropy against targets_BT (gradients scaled by grad_scale) gives it instead, and
  // its terms go to `loss` (which other stages leave as it is). Returns the gradient of the stage's
  // input (undefined on the first stage). With aux-loss balancing the last stage also computes the
  // micro-batch's aux loss from the router totals of every stage (see stage_totals) into `loss`,
  // scaled into the gradients by forward_scale as forward_backward does.
  Tensor stage_backward(const Tensor& dh_ND, const Tensor& targets_BT, float grad_scale, const StageSpan& span,
                        Activations& acts, LossResult& loss, float forward_scale = 1.0f);
  // Aux-loss balancing couples every MoE layer of a forward (HF's loss is over all layers' routing),
  // so under a pipeline two small messages travel beside the activations: forward, the router
  // totals of the stages so far (f64 [2E + 1]: counts, prob sums, rows), which a stage continues
  // layer by layer (the single-rank summation order); backward, d aux / d probs (f64 [E]), which
  // the last stage computes and every stage's routers use. False (nothing travels) otherwise.
  bool stages_carry_router_totals() const { return config_.load_balance == LoadBalance::aux_loss; }
  Tensor stage_totals(const Activations& acts) const;
  void set_stage_totals(Activations& acts, const Tensor& totals) const;
  Tensor stage_aux_grad(const Activations& acts) const;
  void set_stage_aux_grad(Activations& acts, const Tensor& dprobs_E) const;

  // Forward-only loss terms (no gradients, no saved activations), the aux loss included with
  // aux-loss balancing; under tensor parallelism through the vocabulary-parallel head (a
  // collective: every tp rank calls it).
  LossResult forward_loss(const Tensor& ids_BT, const Tensor& targets_BT, const Tensor& positions_BT = Tensor());
  // Inference forward: logits f32 [B, T, V] (materialized: this is the output). positions_BT
  // and sequence as Activations' (the tokens as a later part of a longer sequence).
  Tensor forward_logits(const Tensor& ids_BT, const Tensor& positions_BT = Tensor(),
                        SequenceAttention* sequence = nullptr);

  // Generation with a KV cache (nn/kv_cache.h). An empty cache of `capacity` slots for
  // begin_B.size() rows, row b's first token in slot begin_B[b] (left padding).
  KvCache make_kv_cache(const std::vector<int64_t>& begin_B, int64_t capacity) const;
  // ids_BS: i64 [B, S], the tokens of slots [cache.length, cache.length + S) (the prompt at
  // prefill, then one per step); appends their keys/values and advances cache.length by S.
  // Returns f32 logits [B, S, V], or [B, 1, V] for the last slot only with last_only. Equals
  // forward_logits of the whole sequence to f32 rounding.
  Tensor forward_cached(const Tensor& ids_BS, KvCache& cache, bool last_only);
  // Inference only from here on: gradients are freed and, for bf16, every weight is converted to
  // its bf16 copy once (the f32 master dropped), so no step casts a weight.
  void prepare_inference(DType compute);

  // A pipeline stage's decoder (keep_pipeline_part) holds its part only: tok_embeddings is null
  // unless it is the first stage, norm and output unless the last.
  std::unique_ptr<EmbeddingModule> tok_embeddings;
  std::vector<std::unique_ptr<TransformerBlock>> layers;
  std::unique_ptr<RmsNormModule> norm;
  std::unique_ptr<HeadModule> output;  // its weight is tok_embeddings' table when tied

  // The head's weight: output.weight, or tok_embeddings.weight when tied.
  Parameter& head_weight() { return output->weight(); }
  // Activation checkpointing: what each block keeps for its backward (one entry per layer;
  // default keep_all). Every choice trains the same bits.
  void set_recompute(std::vector<Recompute> per_layer);
  // Mixed precision: every parameter computes in `dtype` (f32 or bf16; Parameter::compute_dtype).
  // Buffers (the MoE routing bias) stay f32.
  void set_compute_dtype(DType dtype);

  // Hooks around every unit (null: none, the default); not owned.
  void set_unit_hooks(UnitHooks* hooks) { hooks_ = hooks; }
  // Tensor parallel (not owned): this decoder was built with one rank's share (heads, kv heads,
  // FFN width and vocabulary divided by tp->degree(); config() says so), its table and head hold
  // vocabulary rows [vocab_start, vocab_start + config().vocab_size). forward_backward and
  // forward_loss (forward_logits is not tensor-parallel).
  void set_tensor_parallel(TensorParallelOps* tp, int64_t vocab_start);

  // Non-trainable state saved with the model (the experts' selection biases; no gradient).
  ParameterList buffers();
  // What a checkpoint holds of the model: parameters() then buffers().
  ParameterList state();
  // Expert load since the last reset, and the bias-balancing update (which also resets it); after
  // each step, through the post-step hook parallelize registers (models/decoder/parallelize.h).
  ExpertLoad expert_load() const;
  void reset_expert_load();
  void update_expert_bias();

 private:
  StepContext make_context(const Tensor& ids_BT, const Tensor& positions_BT, SequenceAttention* sequence) const;
  StepContext make_cached_context(int64_t batch, int64_t seq, const KvCache& cache) const;
  void check_whole(const char* what) const;  // forward_backward & co. run the whole model
  void add_aux_loss(Activations& acts, float forward_scale, LossResult& result) const;
  // The head's loss and its backward to the final norm's output (dhn_ND), TP-aware.
  ops::LmHeadXentResult head_loss_backward(const Tensor& hn_ND, const Tensor& targets_BT, float grad_scale,
                                           Tensor& dhn_ND);

  DecoderConfig config_;
  std::vector<std::string> plugin_nodes_;
  std::vector<Recompute> recompute_;  // per layer
  UnitHooks* hooks_ = nullptr;
  TensorParallelOps* tp_ = nullptr;
  int64_t vocab_start_ = 0;
};

}  // namespace titan::nn
