// LoRA (Hu et al., 2021, computed as Hugging Face PEFT does): a Linear node whose weight W is
// frozen and gets a trainable low-rank update,
//   y_NO = x_NI W_OI^T (+ b_O) + scale * (x_NI A_RI^T) B_OR^T,   scale = alpha / rank,
// A [rank, in] starting as PEFT's kaiming-uniform (U(-1/sqrt(in), 1/sqrt(in))), B [out, rank] at 0,
// so training starts from the base model exactly. Parameters: the base's <fqn>.weight (and
// .bias) plus <fqn>.lora_A.weight and <fqn>.lora_B.weight (trainable, f32 masters, computing in
// the model's compute dtype like every weight). Legend: N tokens, I in, O out, R rank.
//   forward   u_NR = scale * x A^T,  y = x W^T + b + u B^T
//   backward  dB += dy^T u,  du_NR = scale * dy B,  dA += du^T x,  dx = dy W + du A
// With dropout p (PEFT's lora_dropout) the adapter sees d(x) = x ⊙ m instead of x in a training
// step (m: keep with probability 1 - p, scaled by 1 / (1 - p); ops/dropout), and dx gets (du A) ⊙ m:
//   u = scale * d(x) A^T,  dA += du^T d(x),  dx = dy W + (du A) ⊙ m.
// The mask is drawn from the key of the running micro-batch (LoraDropoutKey) and the module's FQN,
// so backward, activation checkpointing's replay, a rerun and a resumed run all draw the same one;
// outside a training step (validation, generation, titan forward) there is no dropout.
// Backward recomputes u from the saved input (N x I x R multiply-adds: small next to the base
// product), so a LoraLinear saves exactly what a Linear saves and activation checkpointing treats
// both alike.
//
// plugins/lora.h's override puts LoraLinear nodes into the config tree (the override registry's
// in-tree user). The rest of the model is frozen by building it inside a FrozenParameterScope
// (nn/parameter.h); the adapters are always trainable.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "titan/nn/linear.h"
#include "titan/nn/moe_experts.h"
#include "titan/ops/dropout/dropout.h"

namespace titan::nn {

class LoraLinearConfig : public LinearConfig {
 public:
  static constexpr const char* kType = "LoraLinear";
  std::vector<std::string> type_chain() const override { return {kType, LinearConfig::kType}; }

  int64_t rank = 0;
  double alpha = 0.0;
  double dropout = 0.0;  // p of the adapter's input dropout, in [0, 1)
};

// The key of the running training micro-batch, from which the adapters' dropout masks are drawn:
// the run's seed, the step, the micro-batch within it and the data-parallel rank (ranks that hold
// the same rows, tensor-parallel peers, draw the same masks). Set by the trainer around each
// micro-batch's forward and backward; unset, nothing is dropped.
struct LoraDropoutKey {
  uint64_t seed = 0;
  int64_t step = 0;
  int64_t micro = 0;
  int64_t rank = 0;
};
void set_lora_dropout_key(const std::optional<LoraDropoutKey>& key);
const std::optional<LoraDropoutKey>& lora_dropout_key();

class LoraLinear : public Linear {
 public:
  LoraLinear(const LoraLinearConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& x_NI, Saved& saved) const override;
  Tensor backward(const Tensor& dy_NO, Saved& saved, bool need_dx = true) override;
  void collect(ParameterList& out) override;  // weight, bias, lora_A, lora_B
  std::string describe() const override { return "lora_linear (built-in)"; }

  float scale() const { return scale_; }
  double dropout() const { return dropout_; }
  Parameter lora_A;  // [rank, in]
  Parameter lora_B;  // [out, rank]

 private:
  Tensor down(const Tensor& x_NI) const;  // u_NR = scale * x A^T, f32
  // The dropout of this module in the running micro-batch; nullopt when nothing is dropped.
  std::optional<ops::DropoutArgs> dropout_args() const;
  // The adapter's input: x, or d(x) in f32 under dropout.
  Tensor adapter_input(const Tensor& x_NI, const std::optional<ops::DropoutArgs>& drop) const;

  int64_t rank_;
  float scale_;
  double dropout_;
};

// LoRA on a MoE layer's stacked experts, as PEFT's target_parameters adapts Transformers' fused
// mlp.experts.gate_up_proj [E, 2F, D] and down_proj [E, D, F] (PEFT's ParamWrapper): expert e's
// weight gets scale * B_e A_e, with PEFT's tensor layouts (R = rank)
//   gate_up  lora_A [R E, D]: expert e's rows e R .. e R + R - 1;  lora_B [2F, R E]: its columns
//            k E + e (k < R); the update's rows [0, F) go to w1 (gate), [F, 2F) to w3 (up)
//   down     lora_A [R E, F], lora_B [D, R E], the same way
// Forward runs the grouped experts (ops/moe_experts) on W + dW, merged at each call as PEFT's
// parametrization merges them; backward gets the merged weights' gradients dW_e from the same op and
// gives dB_e = s dW_e A_e^T, dA_e = s B_e^T dW_e (the base stays frozen). Backward merges again
// rather than keep a second copy of the experts. Parameters <fqn>.gate_up_proj.lora_A.weight,
// ...lora_B.weight, <fqn>.down_proj.lora_A.weight, ...lora_B.weight.
class LoraExpertsConfig : public ExpertsConfig {
 public:
  static constexpr const char* kType = "LoraExperts";
  std::vector<std::string> type_chain() const override { return {kType, ExpertsConfig::kType}; }

  int64_t rank = 0;
  double alpha = 0.0;
};

class LoraExperts : public Experts {
 public:
  LoraExperts(const LoraExpertsConfig& config, const std::string& fqn);

  Tensor forward(const Tensor& x_PD, const Tensor& offsets_E1, std::any& saved) const override;
  void backward(const Tensor& dy_PD, const Tensor& weight_NK, const Tensor& pair_of_row_P, const Tensor& x_PD,
                const Tensor& offsets_E1, std::any& saved, Tensor& dx_PD, Tensor& dweight_NK) override;
  void collect(ParameterList& out) override;  // w1, w2, w3, then the four adapter tensors
  void keep_experts(int64_t first, int64_t count) override;  // refused: adapters are not expert-parallel
  std::string describe() const override { return "lora_experts (built-in)"; }

  float scale() const { return scale_; }
  // The merged stacks in f32: w1 + dW1, w3 + dW3 ([E, F, D]) and w2 + dW2 ([E, D, F]).
  void merged(Tensor& w1_EFD, Tensor& w3_EFD, Tensor& w2_EDF) const;

  Parameter gate_up_A, gate_up_B, down_A, down_B;

 private:
  LoraExpertsConfig config_;
  float scale_;
};

// True for an adapter parameter's FQN ("layers.0.attention.wq.lora_A.weight").
bool is_lora_parameter(const std::string& fqn);
// The FQN of the base weight an adapter parameter belongs to ("layers.0.attention.wq.weight").
std::string lora_base_weight(const std::string& fqn);

// PEFT's initialization of one adapter parameter: lora_A kaiming-uniform (U(-1/sqrt(in),
// 1/sqrt(in)), drawn from `seed` on a stream keyed by its FQN), lora_B zero.
void init_lora_parameter(Parameter& p, uint64_t seed);

class Decoder;
// Every LoraLinear of `model` (attention, gated DeltaNet, feed-forward and shared-expert projections), by the FQN of its base
// weight ("layers.0.attention.wq.weight").
std::map<std::string, LoraLinear*> lora_linears(Decoder& model);
// Every LoraExperts of `model`, by its FQN ("layers.0.moe.experts").
std::map<std::string, LoraExperts*> lora_experts(Decoder& model);
// The weights an HF export writes, by FQN in parameters() order, one at a time (a merged weight
// exists only during its call, so an export converts it before the next is made): every parameter
// but the adapters, a LoRA base weight merged with its update (w + scale B A, f32), the others as
// stored (a quantized base decoded to f32 first, so its merge carries the quantization error).
void for_each_merged_weight(Decoder& model, const std::function<void(const std::string& fqn, const Tensor& w)>& fn);

// The same weights, one parameter at a time in any order (a GGUF export writes them in the
// converter's order): get(p) merges p's adapters (an adapted experts stack merges its three
// weights at once and keeps the two not yet asked for until they are).
class MergedWeights {
 public:
  explicit MergedWeights(Decoder& model);
  const ParameterList& parameters() const { return params_; }  // every parameter but the adapters
  Tensor get(const Parameter& p);

 private:
  std::map<std::string, LoraLinear*> lora_;
  std::map<std::string, LoraExperts*> experts_;  // by each stacked weight's FQN
  std::map<std::string, Tensor> pending_;        // merged expert stacks not yet handed over
  ParameterList params_;
};

// The base weight with its update merged, f32 [out, in]: w + scale * b a (a merged export).
Tensor lora_merged(const Tensor& w_OI, const Tensor& a_RI, const Tensor& b_OR, float scale);

}  // namespace titan::nn
