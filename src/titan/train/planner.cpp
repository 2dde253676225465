#include "titan/train/planner.h"

#include <algorithm>
#include <functional>
#include <utility>

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

// The pipeline's share of rank `pp_rank`: its layers, its root elements (embedding on the first
// stage, norm + head on the last; the whole root without a pipeline).
struct RankPart {
  std::vector<int64_t> layers;
  double root = 0;
  bool head = true;  // holds the last stage (the head's chunk)
};

RankPart rank_part(const PlanInput& in, const Sizes& s, int64_t tp, int64_t pp_rank) {
  RankPart part;
  const nn::DecoderConfig& c = in.model;
  if (in.pipeline.pp <= 1) {
    for (int64_t i = 0; i < c.num_layers; ++i) part.layers.push_back(i);
    part.root = s.root;
    return part;
  }
  part.layers = in.pipeline.layers_of(pp_rank);
  const std::vector<int64_t> stages = in.pipeline.stages_of(pp_rank);
  const double table = static_cast<double>(c.vocab_size / tp) * static_cast<double>(c.dim);
  part.head = stages.back() == in.pipeline.num_stages() - 1;
  part.root = (stages.front() == 0 ? table : 0.0) + (part.head ? table + static_cast<double>(c.dim) : 0.0);
  return part;
}

// A pipeline rank's activation peak: it runs its order, each forward adding its stage's saved
// bytes (slot(stage)) until that stage's backward frees them; each send's [N, D] buffer stays to
// the end of the step. Returns {peak saved bytes, sends}.
std::pair<double, int64_t> pipeline_peak(const PlanInput& in, int64_t pp_rank, int64_t micro_batches,
                                         const std::function<double(int64_t)>& slot) {
  double live = 0, peak = 0;
  int64_t sends = 0;
  const int64_t last = in.pipeline.num_stages() - 1;
  for (const parallel::PipelineAction& a : parallel::pipeline_schedule(in.schedule, in.pipeline, pp_rank, micro_batches)) {
    const bool forward = a.kind == parallel::PipelineAction::forward;
    live += forward ? slot(a.stage) : -slot(a.stage);
    peak = std::max(peak, live);
    sends += forward ? a.stage != last : a.stage != 0;
  }
  return {peak, sends};
}

LayoutPlan plan_rank(const PlanInput& in, int64_t tp, int64_t dp_shard, int64_t pp_rank, int64_t ep) {
  const nn::DecoderConfig& c = in.model;
  const bool pipelined = in.pipeline.pp > 1;
  const int64_t micro_batches = pipelined ? in.local_batch / in.micro_rows : 1;
  // tokens of one (pipeline) micro-batch on one dp rank
  const int64_t n = (pipelined ? in.micro_rows : in.local_batch) * in.seq_len;
  const bool sp = tp > 1 && in.sequence_parallel;
  LayoutPlan p;
  p.dp_replicate = in.dp_replicate;
  p.tp = tp;
  p.ep = ep;
  p.dp_shard = dp_shard;
  p.pp = pipelined ? in.pipeline.pp : 1;
  p.pp_rank = pp_rank;
  if (pipelined) p.bubble = parallel::pipeline_bubble_fraction(in.pipeline, micro_batches);
  Sizes s = tp_sizes(c, tp);
  // A MoE model (tp = 1) counts its router and experts; expert parallelism takes the experts out of
  // the FSDP blocks, and each rank holds 1 / ep of its stages' experts whole.
  const double all_layers = static_cast<double>(c.num_layers);
  if (c.num_experts > 0) s.layer = (static_cast<double>(c.num_params()) - s.root) / all_layers;
  const double experts = ep > 1 ? expert_elements(c) : 0.0;
  s.layer -= experts / all_layers;
  const RankPart part = rank_part(in, s, tp, pp_rank);
  const double layers = static_cast<double>(part.layers.size());
  const double own_experts = experts / static_cast<double>(ep) * (layers / all_layers);
  const double moe_layers = static_cast<double>(std::ranges::count_if(part.layers, [&](int64_t i) {
    return c.is_moe_layer(i);
  }));
  const double local = part.root + layers * s.layer;  // FSDP-sharded elements on this tp rank
  const bool fsdp = in.world > 1;  // titan shards (and gathers) on any multi-rank job
  const double shard = fsdp ? local / static_cast<double>(p.dp_shard) : local;
  p.parameters = kF * (shard + own_experts);
  p.gradients = kF * (shard + own_experts);
  p.optimizer = 2 * kF * (shard + own_experts);
  // bf16 compute gathers bf16 copies (Fsdp: half the bytes); the GEMMs' saved inputs are bf16.
  const double gather_bytes = in.bf16 ? 2.0 : kF, reduce_bytes = in.bf16_reduce ? 2.0 : kF;
  const double lin = in.bf16 ? 2.0 : kF;  // bytes per saved GEMM-input element
  if (fsdp) p.gathered = gather_bytes * (2 * part.root + (in.prefetch && !pipelined ? 3 : 2) * s.layer);

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
  // A MoE layer (tp = 1) saves, instead of the dense MLP's input, gate, up and SwiGLU output
  // (lin D + 2 F + lin F): its f32 input x (D), the router's probabilities (E), the top_k experts,
  // weights and dispatch rows of each token (4 K, four-byte each), and each routed row's gate and
  // up (2 K F_moe); keep_ops drops x, the one cheap to rebuild.
  const double e = static_cast<double>(c.num_experts), top_k = static_cast<double>(c.num_experts_per_tok);
  const double moe_mlp = kF * full * (d + e + 4 * top_k + 2 * top_k * static_cast<double>(c.moe_hidden_dim));
  const double dense_mlp = kF * full * 2 * f + lin * full * (d + f);
  const double moe_layer = per_layer - dense_mlp + moe_mlp;
  const double moe_ops_layer = moe_layer - lin * full * d - kF * full * d - kF * full * (c.qk_norm ? h * k + g * k : 0);
  const double largest_layer = c.num_moe_layers() > 0 ? std::max(per_layer, moe_layer) : per_layer;
  const auto layer_saved = [&](int64_t i) {
    const nn::Recompute r = in.recompute.empty() ? nn::Recompute::keep_all : in.recompute[static_cast<size_t>(i)];
    const bool moe = c.is_moe_layer(i);
    if (r == nn::Recompute::keep_all) return moe ? moe_layer : per_layer;
    return r == nn::Recompute::keep_ops ? (moe ? moe_ops_layer : ops_layer) : kF * norm_tokens * d;
  };
  double saved = 0;
  bool replays = false;
  for (int64_t i : part.layers) {
    saved += layer_saved(i);
    replays = replays || (!in.recompute.empty() && in.recompute[static_cast<size_t>(i)] == nn::Recompute::keep_input);
  }
  if (replays) saved += largest_layer;
  // The final norm's input, ids / targets / positions (i64) and the RoPE tables.
  p.activations = saved + kF * (norm_tokens * (d + 1) + full * k) + 8.0 * 3 * full;
  // Under expert parallelism each MoE layer keeps the rows it received (top_k D floats per token
  // at balanced load).
  const double pairs = full * static_cast<double>(c.num_experts_per_tok);
  const double ep_rows = kF * pairs * d;
  int64_t sends = 0;
  if (pipelined) {  // every live (stage, micro-batch) slot, and the sent activations
    const auto slot = [&](int64_t stage) {
      double bytes = kF * full * k + 8.0 * 3 * full;
      const auto u = static_cast<size_t>(stage);
      for (int64_t i = in.pipeline.first_layer[u]; i < in.pipeline.first_layer[u + 1]; ++i) {
        bytes += layer_saved(i) + (ep > 1 && c.is_moe_layer(i) ? ep_rows : 0.0);
      }
      if (stage == in.pipeline.num_stages() - 1) bytes += kF * norm_tokens * (d + 1);
      return bytes;
    };
    const auto [peak, sent] = pipeline_peak(in, pp_rank, micro_batches, slot);
    sends = sent;
    p.activations = peak + (replays ? largest_layer : 0.0) + kF * norm_tokens * d * static_cast<double>(sends);
  }
  if (ep > 1 && !pipelined) p.activations += ep_rows * moe_layers;
  const double v = static_cast<double>(c.vocab_size / tp);
  // The fused head's chunk (bf16: f32 logits + bf16 dlogits in the same budget), and with bf16
  // compute the head weight's bf16 copy while the head runs.
  const double logit_bytes = in.bf16 ? 6.0 : kF;
  const double chunk =
      std::min(full, std::max(1.0, static_cast<double>(ops::kLmHeadXentChunkBytes) / (logit_bytes * v)));
  p.logits = part.head ? logit_bytes * chunk * v + (in.bf16 ? 2.0 * v * d : 0.0) : 0.0;
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
  // A pipeline gathers each unit per pipeline micro-batch (the root in both its forward and its
  // backward) and sends [N, D] per stage boundary crossed.
  double comm = 0;
  if (fsdp) {
    comm += (gather_bytes * ((pipelined ? 2 : 1) * part.root + 2 * layers * s.layer) +
             reduce_bytes * (part.root + layers * s.layer)) *
            static_cast<double>(in.accumulation * micro_batches);
  }
  comm += kF * norm_tokens * d * static_cast<double>(sends * in.accumulation);
  if (p.dp_replicate > 1) comm += kF * shard;
  // Expert parallelism: each MoE layer's rows out and back in forward (x, y: D floats) and in
  // backward (dy with its routing weight, dx with dweight: D + 1), each counted sent and received;
  // the copies of this rank's experts in other ep groups sum their gradients.
  if (ep > 1) {
    p.all_to_all_bytes =
        kF * 2 * pairs * (2 * d + 2 * (d + 1)) * moe_layers * static_cast<double>(in.accumulation * micro_batches);
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
  const int64_t pp = std::max<int64_t>(in.pipeline.pp, 1);
  // tokens of one micro-batch on one dp rank
  const int64_t n = (pp > 1 ? in.micro_rows : in.local_batch) * in.seq_len;
  for (int64_t tp = 1; tp <= in.world; ++tp) {
    if (in.world % (tp * in.dp_replicate * pp) != 0 || !divides(c, tp)) continue;
    if (tp > 1 && c.num_experts > 0) continue;  // MoE is not tensor-parallel
    const bool sp = tp > 1 && in.sequence_parallel;
    if (sp && n % tp != 0) continue;
    const int64_t dp_shard = in.world / (tp * in.dp_replicate * pp);
    for (int64_t ep = 1; ep <= dp_shard; ++ep) {
      const bool valid = ep == 1 || (c.num_experts > 0 && dp_shard % ep == 0 && c.num_experts % ep == 0);
      const bool asked = in.ep == 0 ? valid : ep == in.ep;
      if (!valid || !asked) continue;
      LayoutPlan worst = plan_rank(in, tp, dp_shard, 0, ep);
      for (int64_t r = 1; r < pp; ++r) {
        const LayoutPlan p = plan_rank(in, tp, dp_shard, r, ep);
        if (p.total > worst.total) worst = p;
      }
      out.push_back(worst);
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
