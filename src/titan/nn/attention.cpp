#include "titan/nn/attention.h"

#include "titan/ops/columns/columns.h"
#include "titan/ops/kv_attention/kv_attention.h"
#include "titan/ops/kv_cache/kv_cache.h"
#include "titan/ops/sigmoid_gate/sigmoid_gate.h"

namespace titan::nn {

// The attention op computes in the projections' precision: bf16 tiles when wq runs in bf16
// (training.mixed_precision_param=bfloat16), with f32 tensors either way.
static ops::AttentionArgs attention_args(const LinearModule& wq) {
  ops::AttentionArgs args;
  args.compute = wq.compute_dtype() == DType::bf16 ? DType::bf16 : DType::f32;
  return args;
}

void AttentionModule::drop_recomputable(std::any&) const {}
void AttentionModule::recompute(const StepContext&, const Tensor&, std::any&) const {}

Tensor AttentionModule::forward_cached(const StepContext&, const Tensor&, KvCache&, int64_t) const {
  throw Error(str("[attention] ", describe(), " has no cached (generation) forward. HINT: generate with the "
                  "built-in attention, or give the plugin module a forward_cached"));
}

// wq's output with output_gate: per head [query | gate], 2 K wide. The query as [B, T, H, K] and
// the gate as [N, H K].
static Tensor split_query_gate(const Tensor& qg_NX, int64_t B, int64_t T, int64_t H, int64_t K, Tensor& gate_NX) {
  const Tensor rows = qg_NX.reshape({B * T * H, 2 * K});
  Tensor q = Tensor::empty({B * T * H, K}, DType::f32, qg_NX.device());
  gate_NX = Tensor::empty({B * T * H, K}, DType::f32, qg_NX.device());
  ops::columns_forward(rows, 0, q);
  ops::columns_forward(rows, K, gate_NX);
  gate_NX = gate_NX.reshape({B * T, H * K});
  return q.reshape({B, T, H, K});
}

// o * sigmoid(gate), both [N, H K].
static Tensor apply_gate(const Tensor& o_NX, const Tensor& gate_NX) {
  Tensor y = Tensor::empty(o_NX.shape(), DType::f32, o_NX.device());
  ops::sigmoid_gate_forward(o_NX, gate_NX, y);
  return y;
}

Attention::Attention(const AttentionConfig& config, const ModuleBuild& build)
    : wq(build.child<LinearModule>("wq")),
      wk(build.child<LinearModule>("wk")),
      wv(build.child<LinearModule>("wv")),
      wo(build.child<LinearModule>("wo")),
      rope(build.child<RopeModule>("rope")),
      config_(config),
      fqn_(build.fqn()) {
  if (config.qk_norm) {
    q_norm = build.child<RmsNormModule>("q_norm");
    k_norm = build.child<RmsNormModule>("k_norm");
  }
}

Tensor Attention::forward(const StepContext& ctx, const Tensor& x_ND, std::any& saved) const {
  Saved& s = saved.emplace<Saved>();
  const int64_t B = ctx.batch, T = ctx.seq, H = config_.num_heads, G = config_.num_kv_heads,
                K = config_.head_dim;
  const Tensor x_in = wq->compute_input(x_ND);  // cast once for the three projections
  Tensor q = config_.output_gate ? split_query_gate(wq->forward(x_in, s.wq), B, T, H, K, s.gate_NX)
                                 : wq->forward(x_in, s.wq).reshape({B, T, H, K});
  Tensor k = wk->forward(x_in, s.wk).reshape({B, T, G, K});
  s.v_BTGK = wv->forward(x_in, s.wv).reshape({B, T, G, K});
  if (q_norm) {
    s.q_pre_BTHK = q;
    s.k_pre_BTGK = k;
    q = q_norm->forward(q, s.q_norm);
    k = k_norm->forward(k, s.k_norm);
  }
  rope->forward(ctx, q);  // in place: the norm output is ours alone
  rope->forward(ctx, k);
  s.q_BTHK = q;
  s.k_BTGK = k;
  s.o_BTHK = Tensor::empty({B, T, H, K}, DType::f32, q.device());
  if (ctx.sequence != nullptr) {
    ctx.sequence->forward(fqn_, attention_args(*wq), s.q_BTHK, s.k_BTGK, s.v_BTGK, s.o_BTHK, s.sequence);
  } else {
    ops::attention_forward(attention_args(*wq), s.q_BTHK, s.k_BTGK, s.v_BTGK, s.o_BTHK, s.attention);
  }
  const Tensor o_NX = s.o_BTHK.reshape({B * T, H * K});
  return wo->forward(config_.output_gate ? apply_gate(o_NX, s.gate_NX) : o_NX, s.wo);
}

Tensor Attention::forward_cached(const StepContext& ctx, const Tensor& x_ND, KvCache& cache, int64_t layer) const {
  const int64_t B = ctx.batch, S = ctx.seq, H = config_.num_heads, G = config_.num_kv_heads, K = config_.head_dim;
  const int64_t start = cache.length;
  TITAN_CHECK(start + S <= cache.capacity(), "[attention] kv cache of ", cache.capacity(), " slots cannot take ",
              S, " more tokens after ", start, ". HINT: size the cache for prompt + new tokens");
  LinearModule::Saved scratch;  // nothing is kept for a backward
  const Tensor x_in = wq->compute_input(x_ND);
  Tensor gate_NX;
  Tensor q = config_.output_gate ? split_query_gate(wq->forward(x_in, scratch), B, S, H, K, gate_NX)
                                 : wq->forward(x_in, scratch).reshape({B, S, H, K});
  Tensor k = wk->forward(x_in, scratch).reshape({B, S, G, K});
  const Tensor v = wv->forward(x_in, scratch).reshape({B, S, G, K});
  if (q_norm) {
    std::any norm_scratch;
    q = q_norm->forward(q, norm_scratch);
    k = k_norm->forward(k, norm_scratch);
  }
  rope->forward(ctx, q);
  rope->forward(ctx, k);
  Tensor& k_cache = cache.k_BCGK[static_cast<size_t>(layer)];
  Tensor& v_cache = cache.v_BCGK[static_cast<size_t>(layer)];
  ops::kv_cache_append(k, start, k_cache);
  ops::kv_cache_append(v, start, v_cache);
  Tensor o_BSHK = Tensor::empty({B, S, H, K}, DType::f32, q.device());
  ops::kv_attention_forward({}, q, k_cache, v_cache, cache.begin_B, start + S, o_BSHK);
  const Tensor o_NX = o_BSHK.reshape({B * S, H * K});
  return wo->forward(config_.output_gate ? apply_gate(o_NX, gate_NX) : o_NX, scratch);
}

Tensor Attention::backward(const StepContext& ctx, const Tensor& dy_ND, std::any& saved) {
  Saved& s = std::any_cast<Saved&>(saved);
  const int64_t B = ctx.batch, T = ctx.seq, H = config_.num_heads, G = config_.num_kv_heads,
                K = config_.head_dim;
  Tensor do_BTHK = wo->backward(dy_ND, s.wo).reshape({B, T, H, K});
  const Device on = do_BTHK.device();
  Tensor dgate_NX;
  if (config_.output_gate) {  // through o * sigmoid(gate)
    Tensor do_NX = Tensor::empty({B * T, H * K}, DType::f32, on);
    dgate_NX = Tensor::empty({B * T, H * K}, DType::f32, on);
    ops::sigmoid_gate_backward(do_BTHK.reshape({B * T, H * K}), s.o_BTHK.reshape({B * T, H * K}), s.gate_NX, do_NX,
                               dgate_NX);
    s.gate_NX = Tensor();
    do_BTHK = do_NX.reshape({B, T, H, K});
  }
  Tensor dq = Tensor::empty({B, T, H, K}, DType::f32, on), dk = Tensor::empty({B, T, G, K}, DType::f32, on),
         dv = Tensor::empty({B, T, G, K}, DType::f32, on);
  if (ctx.sequence != nullptr) {
    ctx.sequence->backward(fqn_, attention_args(*wq), do_BTHK, s.q_BTHK, s.k_BTGK, s.v_BTGK, s.o_BTHK, s.sequence, dq,
                           dk, dv);
  } else {
    ops::attention_backward(attention_args(*wq), do_BTHK, Tensor(), s.q_BTHK, s.k_BTGK, s.v_BTGK, s.o_BTHK,
                            s.attention, dq, dk, dv);
  }
  s.q_BTHK = s.k_BTGK = s.v_BTGK = s.o_BTHK = Tensor();
  s.attention = {};
  s.sequence.reset();
  rope->backward(ctx, dq);
  rope->backward(ctx, dk);
  if (q_norm) {
    s.q_pre_BTHK = s.k_pre_BTGK = Tensor();
    dq = q_norm->backward(dq, s.q_norm);
    dk = k_norm->backward(dk, s.k_norm);
  }
  Tensor dx_ND;
  if (config_.output_gate) {  // [dquery | dgate] per head, wq's output layout
    Tensor dqg = Tensor::empty({B * T * H, 2 * K}, DType::f32, on);
    ops::columns_backward(dq.reshape({B * T * H, K}), 0, dqg);
    ops::columns_backward(dgate_NX.reshape({B * T * H, K}), K, dqg);
    dx_ND = wq->backward(dqg.reshape({B * T, H * 2 * K}), s.wq);
  } else {
    dx_ND = wq->backward(dq.reshape({B * T, H * K}), s.wq);
  }
  add_inplace(dx_ND, wk->backward(dk.reshape({B * T, G * K}), s.wk));
  add_inplace(dx_ND, wv->backward(dv.reshape({B * T, G * K}), s.wv));
  saved.reset();
  return dx_ND;
}

void Attention::drop_recomputable(std::any& saved) const {
  Saved& s = std::any_cast<Saved&>(saved);
  s.wq = s.wk = s.wv = {};
  if (q_norm) s.q_BTHK = s.k_BTGK = Tensor();  // rebuilt from the projections
}

void Attention::recompute(const StepContext& ctx, const Tensor& x_ND, std::any& saved) const {
  Saved& s = std::any_cast<Saved&>(saved);
  s.wq.x_NI = s.wk.x_NI = s.wv.x_NI = wq->compute_input(x_ND);
  if (s.q_BTHK.defined()) return;
  std::any scratch;  // the norms' saved state is kept; this replay's copy equals it
  s.q_BTHK = q_norm->forward(s.q_pre_BTHK, scratch);
  s.k_BTGK = k_norm->forward(s.k_pre_BTGK, scratch);
  rope->forward(ctx, s.q_BTHK);
  rope->forward(ctx, s.k_BTGK);
}

void Attention::check(int64_t batch, int64_t seq) const {
  if (q_norm) {
    q_norm->check(batch, seq);
    k_norm->check(batch, seq);
  }
  rope->check_heads(batch, seq, config_.num_heads, config_.head_dim);
  rope->check_heads(batch, seq, config_.num_kv_heads, config_.head_dim);
}

void Attention::collect(ParameterList& out) {
  wq->collect(out);
  wk->collect(out);
  wv->collect(out);
  wo->collect(out);
  if (q_norm) {
    q_norm->collect(out);
    k_norm->collect(out);
  }
}

}  // namespace titan::nn
