// Scalar reference for the MoE router: per token, plain loops, math in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "titan/ops/moe_router/moe_router.h"

namespace titan::ops {
namespace ref {

// One token: logits, softmax probs (double), and the top-k by logit (softmax is monotonic, so
// this is the top-k by prob without ties that rounding of the probs would create), or by
// prob + bias when a selection bias is given; ties to the lower expert index.
template <class T>
static void route_token(int64_t d, int64_t e, int64_t top_k, const T* x, const T* w_gate,
                        const float* bias, T* logits, std::vector<double>& p, int32_t* expert) {
  std::vector<double> z(e);
  double zmax = -INFINITY;
  for (int64_t j = 0; j < e; ++j) {
    double acc = 0.0;
    for (int64_t i = 0; i < d; ++i) acc += static_cast<double>(x[i]) * w_gate[j * d + i];
    logits[j] = static_cast<T>(acc);
    z[j] = static_cast<double>(logits[j]);
    zmax = std::max(zmax, z[j]);
  }
  double sum = 0.0;
  for (int64_t j = 0; j < e; ++j) sum += (p[j] = std::exp(z[j] - zmax));
  for (int64_t j = 0; j < e; ++j) p[j] /= sum;
  std::vector<double> key(z);
  if (bias != nullptr) {
    for (int64_t j = 0; j < e; ++j) key[j] = static_cast<double>(static_cast<float>(p[j]) + bias[j]);
  }
  std::vector<bool> taken(e, false);
  for (int64_t k = 0; k < top_k; ++k) {
    int64_t best = -1;
    for (int64_t j = 0; j < e; ++j) {
      if (!taken[j] && (best < 0 || key[j] > key[best])) best = j;
    }
    taken[best] = true;
    expert[k] = static_cast<int32_t>(best);
  }
}

template <class T>
void moe_router_forward(int64_t n, int64_t d, int64_t e, int64_t top_k, bool norm_topk_prob,
                        const T* x, const T* w_gate, const float* selection_bias, T* logits,
                        T* probs, int32_t* expert, T* weight) {
  std::vector<double> p(e);
  for (int64_t t = 0; t < n; ++t) {
    int32_t* ex = expert + t * top_k;
    route_token(d, e, top_k, x + t * d, w_gate, selection_bias, logits + t * e, p, ex);
    for (int64_t j = 0; j < e; ++j) probs[t * e + j] = static_cast<T>(p[j]);
    double psum = 0.0;
    for (int64_t k = 0; k < top_k; ++k) psum += p[ex[k]];
    for (int64_t k = 0; k < top_k; ++k) {
      weight[t * top_k + k] = static_cast<T>(norm_topk_prob ? p[ex[k]] / psum : p[ex[k]]);
    }
  }
}

// Per token (moe_router.md): dp through the renormalisation (0 for unchosen experts), softmax
// backward plus the caller's dlogits, then dx = dz w_gate and dw_gate += dz^T x.
template <class T>
void moe_router_backward(int64_t n, int64_t d, int64_t e, int64_t top_k, bool norm_topk_prob,
                         const T* dweight, const T* dlogits, const T* x, const T* w_gate,
                         const T* probs, const int32_t* expert, const T* weight, T* dx,
                         T* dw_gate) {
  std::vector<double> dp(e), dxt(d);
  for (int64_t t = 0; t < n; ++t) {
    const T* xt = x + t * d;
    const T* pt = probs + t * e;
    const T* dw = dweight + t * top_k;
    const int32_t* ex = expert + t * top_k;
    // weight_k = p_k / S (S = sum of the chosen p) when normalised, else p_k:
    //   dp_k = (dweight_k - sum_j dweight_j weight_j) / S, or dweight_k.
    std::fill(dp.begin(), dp.end(), 0.0);
    if (norm_topk_prob) {
      double psum = 0.0, mean = 0.0;
      for (int64_t k = 0; k < top_k; ++k) psum += pt[ex[k]];
      for (int64_t k = 0; k < top_k; ++k) mean += static_cast<double>(dw[k]) * weight[t * top_k + k];
      for (int64_t k = 0; k < top_k; ++k) dp[ex[k]] = (dw[k] - mean) / psum;
    } else {
      for (int64_t k = 0; k < top_k; ++k) dp[ex[k]] = dw[k];
    }
    // Softmax backward: dz_j = p_j (dp_j - sum_i p_i dp_i), plus the caller's dlogits.
    double pdp = 0.0;
    for (int64_t j = 0; j < e; ++j) pdp += static_cast<double>(pt[j]) * dp[j];
    std::fill(dxt.begin(), dxt.end(), 0.0);
    for (int64_t j = 0; j < e; ++j) {
      double dz = static_cast<double>(pt[j]) * (dp[j] - pdp);
      if (dlogits != nullptr) dz += dlogits[t * e + j];
      for (int64_t i = 0; i < d; ++i) {
        dxt[i] += dz * w_gate[j * d + i];
        dw_gate[j * d + i] += static_cast<T>(dz * xt[i]);
      }
    }
    for (int64_t i = 0; i < d; ++i) dx[t * d + i] = static_cast<T>(dxt[i]);
  }
}

#define TITAN_MOE_ROUTER_REF_INSTANTIATE(T)                                                        \
  template void moe_router_forward<T>(int64_t, int64_t, int64_t, int64_t, bool, const T*,          \
                                      const T*, const float*, T*, T*, int32_t*, T*);               \
  template void moe_router_backward<T>(int64_t, int64_t, int64_t, int64_t, bool, const T*,         \
                                       const T*, const T*, const T*, const T*, const int32_t*,     \
                                       const T*, T*, T*);
TITAN_MOE_ROUTER_REF_INSTANTIATE(float)
TITAN_MOE_ROUTER_REF_INSTANTIATE(double)
#undef TITAN_MOE_ROUTER_REF_INSTANTIATE

}  // namespace ref

static void forward_ref(const MoeRouterArgs& args, const Tensor& x, const Tensor& w_gate,
                        Tensor& logits, MoeRouting& routing) {
  const int64_t n = x.size(0), d = x.size(1), e = w_gate.size(0), kk = args.top_k;
  routing.probs_NE = Tensor::empty({n, e});
  routing.expert_NK = Tensor::empty({n, kk}, DType::i32);
  routing.weight_NK = Tensor::empty({n, kk});
  routing.expert_counts_E = Tensor::zeros({e}, DType::i64);
  const int32_t* expert = routing.expert_NK.data<int32_t>();
  ref::moe_router_forward(n, d, e, kk, args.norm_topk_prob, x.data<float>(), w_gate.data<float>(),
                          args.selection_bias_E.defined() ? args.selection_bias_E.data<float>() : nullptr,
                          logits.data<float>(), routing.probs_NE.data<float>(),
                          routing.expert_NK.data<int32_t>(), routing.weight_NK.data<float>());
  int64_t* counts = routing.expert_counts_E.data<int64_t>();
  for (int64_t q = 0; q < n * kk; ++q) ++counts[expert[q]];
}

static void backward_ref(const MoeRouterArgs& args, const Tensor& dweight, const Tensor& dlogits,
                         const Tensor& x, const Tensor& w_gate, const MoeRouting& routing,
                         Tensor& dx, Tensor& dw_gate) {
  ref::moe_router_backward(x.size(0), x.size(1), w_gate.size(0), args.top_k, args.norm_topk_prob,
                           dweight.data<float>(), dlogits.defined() ? dlogits.data<float>() : nullptr,
                           x.data<float>(), w_gate.data<float>(), routing.probs_NE.data<float>(),
                           routing.expert_NK.data<int32_t>(), routing.weight_NK.data<float>(),
                           dx.data<float>(), dw_gate.data<float>());
}

MoeRouterImpl moe_router_impl_ref() {
  return {"moe_router_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
