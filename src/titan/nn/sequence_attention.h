// Attention over a sequence that is more than this micro-batch's own tokens. nn::Attention asks the
// StepContext's SequenceAttention, when one is set, for the attention of its queries; without one
// (today's training) the tokens are the whole sequence and the layer runs ops::attention locally.
// The seam context parallelism fills (ring attention: each rank's key/value chunk visits every
// rank, the partial results merged by their log-sum-exp, ops/attention_merge), and what a long
// sequence's forward in chunks uses: PrefixAttention below, the keys and values of the sequence's
// first part recorded by an earlier forward (KvRecorder).
// Legend: B batch, T this chunk's tokens, P the prefix's, H query heads, G kv heads, K head dim,
// Kv value head dim. A layer is named by its FQN ("layers.3.attention").
#pragma once

#include <any>
#include <map>
#include <string>

#include "titan/core/tensor.h"
#include "titan/ops/attention/attention.h"

namespace titan::nn {

class SequenceAttention {
 public:
  virtual ~SequenceAttention() = default;
  // out_BTHK = attention of this chunk's queries q_BTHK (RoPE applied at their positions) over the
  // sequence's keys, this chunk's k_BTGK / v_BTGK among them; `args` carries the compute precision
  // and scale (the implementation sets the mask and offsets). Fills `saved` for backward.
  virtual void forward(const std::string& layer, const ops::AttentionArgs& args, const Tensor& q_BTHK,
                       const Tensor& k_BTGK, const Tensor& v_BTGK, Tensor& out_BTHK, std::any& saved) = 0;
  // dq_BTHK, dk_BTGK, dv_BTGK (=): the gradients of this chunk's q, k, v.
  virtual void backward(const std::string& layer, const ops::AttentionArgs& args, const Tensor& dout_BTHK,
                        const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK, const Tensor& out_BTHK,
                        std::any& saved, Tensor& dq_BTHK, Tensor& dk_BTGK, Tensor& dv_BTGK) = 0;
};

// The sequence is this chunk alone (causal, offsets 0), as without a SequenceAttention, and every
// layer's k and v are kept: the prefix a PrefixAttention then continues from.
class KvRecorder : public SequenceAttention {
 public:
  void forward(const std::string& layer, const ops::AttentionArgs& args, const Tensor& q_BTHK, const Tensor& k_BTGK,
               const Tensor& v_BTGK, Tensor& out_BTHK, std::any& saved) override;
  void backward(const std::string& layer, const ops::AttentionArgs& args, const Tensor& dout_BTHK,
                const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK, const Tensor& out_BTHK,
                std::any& saved, Tensor& dq_BTHK, Tensor& dk_BTGK, Tensor& dv_BTGK) override;
  struct Kv {
    Tensor k_BPGK, v_BPGK;
  };
  const std::map<std::string, Kv>& recorded() const { return kv_; }

 private:
  std::map<std::string, Kv> kv_;
};

// This chunk continues a prefix of P tokens (positions 0..P-1) whose keys and values a KvRecorder
// kept: queries at positions P.. see every prefix key and, causally, this chunk's own. Two parts
// (prefix: keys at 0, queries at P; own: both at P) merged by their lse. The prefix is constant:
// its keys and values get no gradient.
class PrefixAttention : public SequenceAttention {
 public:
  explicit PrefixAttention(const KvRecorder& prefix) : prefix_(prefix) {}
  void forward(const std::string& layer, const ops::AttentionArgs& args, const Tensor& q_BTHK, const Tensor& k_BTGK,
               const Tensor& v_BTGK, Tensor& out_BTHK, std::any& saved) override;
  void backward(const std::string& layer, const ops::AttentionArgs& args, const Tensor& dout_BTHK,
                const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK, const Tensor& out_BTHK,
                std::any& saved, Tensor& dq_BTHK, Tensor& dk_BTGK, Tensor& dv_BTGK) override;

 private:
  const KvRecorder::Kv& prefix_of(const std::string& layer) const;
  const KvRecorder& prefix_;
};

}  // namespace titan::nn
