#include "titan/train/planner.h"

#include <algorithm>

#include "titan/ops/softmax_xent/softmax_xent.h"

namespace titan::train {
namespace {

constexpr double kF = 4.0;  // bytes per fp32 element

// Elements of one tp rank's share of a block and of the root (embedding + final norm + head).
struct Sizes {
  double layer = 0, root = 0;
};

Sizes tp_sizes(const nn::DecoderConfig& c, int64_t tp) {
  const double d = static_cast<double>(c.dim), k = static_cast<double>(c.head_dim);
  const double h = static_cast<double>(c.num_heads / tp), g = static_cast<double>(c.num_kv_heads / tp);
  const double f = static_cast<double>(c.hidden_dim / tp), v = static_cast<double>(c.vocab_size / tp);
  Sizes s;
  s.layer = d * h * k * 2 + d * g * k * 2 + 3 * d * f + 2 * d + (c.qk_norm ? 2 * k : 0);
  if (c.qkv_bias || c.attention_bias) s.layer += (h + 2 * g) * k;
  s.root = v * d * (c.tie_embeddings ? 1 : 2) + d;
  return s;
}

bool divides(const nn::DecoderConfig& c, int64_t tp) {
  return c.num_heads % tp == 0 && c.num_kv_heads % tp == 0 && c.hidden_dim % tp == 0 && c.vocab_size % tp == 0;
}

// Elements of every MoE layer's expert weights together (w1, w3, w2: 3 E F D each layer).
double expert_elements(const nn::DecoderConfig& c) {
  return static_cast<double>(c.num_moe_layers()) * 3.0 * static_cast<double>(c.num_experts) *
         static_cast<double>(c.moe_hidden_dim) * static_cast<double>(c.dim);
}

// One layout's memory and communication (see planner.h).
LayoutPlan plan_layout(const PlanInput& in, int64_t tp, int64_t ep) {
  const nn::DecoderConfig& c = in.model;
  const int64_t n = in.local_batch * in.seq_len;  // tokens of one micro-batch on one dp rank
  const bool sp = tp > 1 && in.sequence_parallel;
  LayoutPlan p;
  p.dp_replicate = in.dp_replicate;
  p.tp = tp;
  p.ep = ep;
  p.dp_shard = in.world / (tp * in.dp_replicate);
  Sizes s = tp_sizes(c, tp);
  const double layers = static_cast<double>(c.num_layers);
  // A MoE model (tp = 1) counts its router and experts; expert parallelism takes the experts out
  // of the FSDP blocks, and each rank holds 1 / ep of them whole.
  if (c.num_experts > 0) s.layer = (static_cast<double>(c.num_params()) - s.root) / layers;
  const double experts = ep > 1 ? expert_elements(c) : 0.0;
  s.layer -= experts / layers;
  const double own_experts = experts / static_cast<double>(ep);
  const double local = s.root + layers * s.layer;  // FSDP-sharded elements on this tp rank
  const bool fsdp = in.world > 1;                  // titan shards (and gathers) on any multi-rank job
  const double shard = fsdp ? local / static_cast<double>(p.dp_shard) : local;
  p.parameters = kF * (shard + own_experts);
  p.gradients = kF * (shard + own_experts);
  p.optimizer = 2 * kF * (shard + own_experts);
  // bf16 compute gathers bf16 copies (Fsdp: half the bytes); the GEMMs' saved inputs are bf16.
  const double gather_bytes = in.bf16 ? 2.0 : kF, reduce_bytes = in.bf16_reduce ? 2.0 : kF;
  const double lin = in.bf16 ? 2.0 : kF;  // bytes per saved GEMM-input element
  if (fsdp) p.gathered = gather_bytes * (2 * s.root + (in.prefetch ? 3 : 2) * s.layer);

  // Saved per token of a layer, in elements (the modules' saved tensors; full = the N tokens a
  // TP region reads, norm = the N / tp tokens norms see under sequence parallelism), f32 unless
  // marked (lin: f32, or bf16 with bf16 compute):
  //   attention_norm x + rstd, ffn_norm h + rstd                        2 (D + 1) per norm token
  //   wq/wk/wv input, w1/w3 input (gathered copies under SP)            2 D per full token (lin)
  //   q/k norm inputs + rstds, q, k, v, o, lse                          3 H K + 3 G K + 2 H + G
  //   gate, up                                                          2 F
  //   the SwiGLU output (w2's input)                                    F (lin)
  //   bf16 compute only: wo's bf16 copy of o                            H K (bf16)
  const double d = static_cast<double>(c.dim), k = static_cast<double>(c.head_dim);
  const double h = static_cast<double>(c.num_heads / tp), g = static_cast<double>(c.num_kv_heads / tp);
  const double f = static_cast<double>(c.hidden_dim / tp);
  const double full = static_cast<double>(n), norm_tokens = sp ? full / static_cast<double>(tp) : full;
  const double per_layer = kF * (norm_tokens * 2 * (d + 1) + full * (3 * h * k + 3 * g * k + 2 * h + g + 2 * f)) +
                           lin * full * (2 * d + f) + (in.bf16 ? 2.0 * full * h * k : 0.0);
  // Activation checkpointing (nn::Recompute): keep_ops drops the projections' and the mlp's
  // inputs (2 D), q and k after norm and RoPE (H K + G K, with a q/k norm to rebuild them) and the
  // SwiGLU output (F); keep_input keeps the block's input (D per norm token), and the block being
  // recomputed in backward holds a whole block's worth once.
  const double ops_layer = per_layer - lin * full * (2 * d + f) - kF * full * (c.qk_norm ? h * k + g * k : 0);
  double saved = 0;
  bool replays = false;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const nn::Recompute r = in.recompute.empty() ? nn::Recompute::keep_all : in.recompute[static_cast<size_t>(i)];
    saved += r == nn::Recompute::keep_all ? per_layer : r == nn::Recompute::keep_ops ? ops_layer : kF * norm_tokens * d;
    replays = replays || r == nn::Recompute::keep_input;
  }
  if (replays) saved += per_layer;
  // The final norm's input, ids / targets / positions (i64) and the RoPE tables; under expert
  // parallelism each MoE layer's received rows (top_k D floats per token at balanced load).
  const double pairs = full * static_cast<double>(c.num_experts_per_tok);
  const double moe_layers = static_cast<double>(c.num_moe_layers());
  p.activations = saved + kF * (norm_tokens * (d + 1) + full * k) + 8.0 * 3 * full;
  if (ep > 1) p.activations += kF * pairs * d * moe_layers;
  const double v = static_cast<double>(c.vocab_size / tp);
  // The fused head's chunk (bf16: f32 logits + bf16 dlogits in the same budget), and with bf16
  // compute the head weight's bf16 copy while the head runs.
  const double logit_bytes = in.bf16 ? 6.0 : kF;
  const double chunk =
      std::min(full, std::max(1.0, static_cast<double>(ops::kLmHeadXentChunkBytes) / (logit_bytes * v)));
  p.logits = logit_bytes * chunk * v + (in.bf16 ? 2.0 * v * d : 0.0);
  // Backward temporaries of one block: dgate, dup and the SwiGLU gradient (3 F), dq/dk/dv/do
  // (2 H K + 2 G K), a few [N, D] gradients; plus the head's full-token dhn.
  p.transient = kF * full * (3 * f + 2 * h * k + 2 * g * k + 3 * d);
  // The head's chunk is gone before the first block's backward allocates its temporaries.
  p.total = p.parameters + p.gradients + p.optimizer + p.gathered + p.activations +
            std::max(p.logits + kF * full * d, p.transient);
  p.fits = in.memory_per_rank <= 0 || p.total <= in.memory_per_rank;

  // Per micro-batch: FSDP gathers the root once and each block twice (forward, backward) and
  // reduce-scatters each unit once; HSDP all-reduces the shards once per step. TP moves [N, D]
  // activations: with sequence parallelism each block all-gathers and reduce-scatters twice in
  // the forward and twice in the backward (8), the embedding and the head 2 each; without, each
  // block all-reduces twice (forward) and twice (backward), the embedding and the head once
  // each; plus the head's per-token statistics (3 doubles).
  double comm = 0;
  if (fsdp) {
    comm += (gather_bytes * (s.root + 2 * layers * s.layer) + reduce_bytes * (s.root + layers * s.layer)) *
            static_cast<double>(in.accumulation);
  }
  if (p.dp_replicate > 1) comm += kF * shard;
  // Expert parallelism: each MoE layer's rows out and back in forward (x, y: D floats) and in
  // backward (dy with its routing weight, dx with dweight: D + 1), each counted sent and received;
  // the copies of this rank's experts in other ep groups sum their gradients.
  if (ep > 1) {
    p.all_to_all_bytes = kF * 2 * pairs * (2 * d + 2 * (d + 1)) * moe_layers * static_cast<double>(in.accumulation);
    comm += p.all_to_all_bytes;
    if (p.dp_replicate * p.dp_shard > ep) comm += kF * own_experts;
  }
  if (tp > 1) {
    const double act = kF * full * d;
    comm += (sp ? 8 * layers + 4 : 4 * layers + 2) * act * static_cast<double>(in.accumulation);
    comm += 8.0 * 3 * full * static_cast<double>(in.accumulation);
  }
  p.comm_bytes = comm;
  return p;
}

}  // namespace

std::vector<LayoutPlan> plan_layouts(const PlanInput& in) {
  std::vector<LayoutPlan> out;
  const nn::DecoderConfig& c = in.model;
  const int64_t n = in.local_batch * in.seq_len;  // tokens of one micro-batch on one dp rank
  for (int64_t tp = 1; tp <= in.world; ++tp) {
    if (in.world % (tp * in.dp_replicate) != 0 || !divides(c, tp)) continue;
    if (tp > 1 && c.num_experts > 0) continue;  // MoE is not tensor-parallel
    if (tp > 1 && in.sequence_parallel && n % tp != 0) continue;
    const int64_t dp_shard = in.world / (tp * in.dp_replicate);
    for (int64_t ep = 1; ep <= dp_shard; ++ep) {
      const bool valid = ep == 1 || (c.num_experts > 0 && dp_shard % ep == 0 && c.num_experts % ep == 0);
      const bool asked = in.ep == 0 ? valid : ep == in.ep;
      if (valid && asked) out.push_back(plan_layout(in, tp, ep));
    }
  }
  return out;
}

int recommended_layout(const std::vector<LayoutPlan>& plans) {
  for (size_t i = 0; i < plans.size(); ++i) {
    if (plans[i].fits) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace titan::train
