#include "titan/nn/head.h"

#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/matmul/linear.h"

namespace titan::nn {

Head::Head(const HeadConfig& config, const std::string& fqn) : config_(config) {
  if (!config.tied) own_.init(fqn + ".weight", {config.vocab_size, config.dim}, parameter_device());
}

ops::LmHeadXentResult Head::loss(const Tensor& x_ND, const Tensor& targets, float grad_scale, Tensor& dx_ND) {
  Tensor no_grad;
  Parameter& w = weight();
  // Under bf16 compute from the f32 master, the op rounds the weight as its GEMMs read it: no
  // V x D bf16 copy.
  return ops::lm_head_xent({}, ops::cast_to(x_ND, w.compute_dtype), w.for_gemm(), targets, grad_scale, dx_ND,
                           dx_ND.defined() ? w.grad : no_grad);
}

Tensor Head::logits(const Tensor& x_ND) {
  Tensor logits_NV = Tensor::empty({x_ND.size(0), config_.vocab_size}, DType::f32, x_ND.device());
  const Tensor w_VD = weight().for_compute();
  ops::linear_forward(ops::cast_to(x_ND, w_VD.dtype()), w_VD, Tensor(), logits_NV);
  return logits_NV;
}

void Head::collect(ParameterList& out) {
  if (tied_ == nullptr && own_.defined()) out.push_back(&own_);
}

}  // namespace titan::nn
