#include "titan/nn/attention.h"

namespace titan::nn {

Attention::Attention(const AttentionConfig& config, const std::string& fqn)
    : wq({config.dim, config.num_heads * config.head_dim, config.bias}, fqn + ".wq"),
      wk({config.dim, config.num_kv_heads * config.head_dim, config.bias}, fqn + ".wk"),
      wv({config.dim, config.num_kv_heads * config.head_dim, config.bias}, fqn + ".wv"),
      wo({config.num_heads * config.head_dim, config.dim, config.out_bias}, fqn + ".wo"),
      rope(std::make_unique<Rope>()),
      config_(config) {
  if (config.qk_norm) {
    q_norm = std::make_unique<RmsNorm>(RmsNormConfig{config.head_dim, config.norm_eps}, fqn + ".q_norm");
    k_norm = std::make_unique<RmsNorm>(RmsNormConfig{config.head_dim, config.norm_eps}, fqn + ".k_norm");
  }
}

Tensor Attention::forward(const StepContext& ctx, const Tensor& x_ND) {
  const int64_t B = ctx.batch, T = ctx.seq, H = config_.num_heads, G = config_.num_kv_heads,
                K = config_.head_dim;
  Tensor q = wq.forward(x_ND).reshape({B, T, H, K});
  Tensor k = wk.forward(x_ND).reshape({B, T, G, K});
  v_BTGK_ = wv.forward(x_ND).reshape({B, T, G, K});
  if (q_norm) {
    q = q_norm->forward(q);
    k = k_norm->forward(k);
  }
  rope->forward(ctx, q);  // in place: the norm output is ours alone
  rope->forward(ctx, k);
  q_BTHK_ = q;
  k_BTGK_ = k;
  o_BTHK_ = Tensor::empty({B, T, H, K}, DType::f32, q.device());
  ops::attention_forward({}, q_BTHK_, k_BTGK_, v_BTGK_, o_BTHK_, saved_);
  return wo.forward(o_BTHK_.reshape({B * T, H * K}));
}

Tensor Attention::backward(const StepContext& ctx, const Tensor& dy_ND) {
  const int64_t B = ctx.batch, T = ctx.seq, H = config_.num_heads, G = config_.num_kv_heads,
                K = config_.head_dim;
  const Tensor do_BTHK = wo.backward(dy_ND).reshape({B, T, H, K});
  const Device on = do_BTHK.device();
  Tensor dq = Tensor::empty({B, T, H, K}, DType::f32, on), dk = Tensor::empty({B, T, G, K}, DType::f32, on),
         dv = Tensor::empty({B, T, G, K}, DType::f32, on);
  ops::attention_backward({}, do_BTHK, q_BTHK_, k_BTGK_, v_BTGK_, o_BTHK_, saved_, dq, dk, dv);
  q_BTHK_ = k_BTGK_ = v_BTGK_ = o_BTHK_ = Tensor();
  saved_ = {};
  rope->backward(ctx, dq);
  rope->backward(ctx, dk);
  if (q_norm) {
    dq = q_norm->backward(dq);
    dk = k_norm->backward(dk);
  }
  Tensor dx_ND = wq.backward(dq.reshape({B * T, H * K}));
  add_inplace(dx_ND, wk.backward(dk.reshape({B * T, G * K})));
  add_inplace(dx_ND, wv.backward(dv.reshape({B * T, G * K})));
  return dx_ND;
}

void Attention::collect(ParameterList& out) {
  wq.collect(out);
  wk.collect(out);
  wv.collect(out);
  wo.collect(out);
  if (q_norm) {
    q_norm->collect(out);
    k_norm->collect(out);
  }
}

void Attention::release() {
  wq.release();
  wk.release();
  wv.release();
  wo.release();
  if (q_norm) {
    q_norm->release();
    k_norm->release();
  }
  q_BTHK_ = k_BTGK_ = v_BTGK_ = o_BTHK_ = Tensor();
  saved_ = {};
}

}  // namespace titan::nn
