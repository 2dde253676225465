// MoE router on CPU: one GEMM for the logits, then per token (threads over tokens) the softmax
// (fp32 values, double sums), the top-k and the weights. Backward: per token dz (moe_router.md),
// then one GEMM each for dx and dw_gate. Every value is computed by one thread in a fixed order:
// results do not depend on the thread count.
// Shape legend: N tokens, D model width, E experts, K top_k.
#include <algorithm>
#include <cmath>
#include <vector>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/ops/moe_router/moe_router.h"

namespace titan::ops {

using kernels::gemm;

// Tokens per thread chunk at least in the per-token loops.
constexpr int64_t kTokenGrain = 16;

// Per token: softmax of the logits into probs, top-k by logit (by prob + bias when balancing by
// bias; ties to the lower index), weights.
static void route_tokens(const MoeRouterArgs& args, int64_t n, int64_t e, const float* zp,
                         float* probs, int32_t* expert, float* weight) {
  const int64_t kk = args.top_k;
  const float* bias = args.selection_bias_E.defined() ? args.selection_bias_E.data<float>() : nullptr;
  parallel_for(n, kTokenGrain, [&](int64_t begin, int64_t end) {
    std::vector<char> taken(static_cast<size_t>(e));
    std::vector<float> biased(static_cast<size_t>(e));
    for (int64_t t = begin; t < end; ++t) {
      const float* z = zp + t * e;
      float* pt = probs + t * e;
      const float zmax = *std::max_element(z, z + e);
      double sum = 0.0;
      for (int64_t j = 0; j < e; ++j) sum += (pt[j] = std::exp(z[j] - zmax));
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j < e; ++j) pt[j] *= inv;
      std::fill(taken.begin(), taken.end(), 0);
      const float* key = z;  // the logits order the probs without rounding ties
      if (bias != nullptr) {
        for (int64_t j = 0; j < e; ++j) biased[static_cast<size_t>(j)] = pt[j] + bias[j];
        key = biased.data();
      }
      double psum = 0.0;
      for (int64_t k = 0; k < kk; ++k) {
        int64_t best = -1;
        for (int64_t j = 0; j < e; ++j) {
          if (!taken[j] && (best < 0 || key[j] > key[best])) best = j;
        }
        taken[best] = 1;
        expert[t * kk + k] = static_cast<int32_t>(best);
        psum += pt[best];
      }
      for (int64_t k = 0; k < kk; ++k) {
        const float pk = pt[expert[t * kk + k]];
        weight[t * kk + k] = args.norm_topk_prob ? static_cast<float>(pk / psum) : pk;
      }
    }
  });
}

// What the kernels allocate, on x's device: the routing the forward writes, the backward's dz.
// The CPU kernel's memory and, shapes only, the meta device's (moe_router_impl_meta).
static void allocate_routing(const MoeRouterArgs& args, const Tensor& x, const Tensor& w_gate, MoeRouting& routing) {
  const int64_t n = x.size(0), e = w_gate.size(0), kk = args.top_k;
  routing.probs_NE = Tensor::empty({n, e}, DType::f32, x.device());
  routing.expert_NK = Tensor::empty({n, kk}, DType::i32, x.device());
  routing.weight_NK = Tensor::empty({n, kk}, DType::f32, x.device());
  routing.expert_counts_E = Tensor::zeros({e}, DType::i64, x.device());
}
static Tensor backward_dz(const Tensor& x, const Tensor& w_gate) {
  return Tensor::empty({x.size(0), w_gate.size(0)}, DType::f32, x.device());
}

static void forward_cpu(const MoeRouterArgs& args, const Tensor& x, const Tensor& w_gate,
                        Tensor& logits, MoeRouting& routing) {
  const int64_t n = x.size(0), d = x.size(1), e = w_gate.size(0), kk = args.top_k;
  allocate_routing(args, x, w_gate, routing);
  if (n == 0) return;
  float* zp = logits.data<float>();
  int32_t* expert = routing.expert_NK.data<int32_t>();
  gemm(false, true, n, e, d, 1.0f, x.data<float>(), d, w_gate.data<float>(), d, 0.0f, zp, e);
  route_tokens(args, n, e, zp, routing.probs_NE.data<float>(), expert,
               routing.weight_NK.data<float>());
  int64_t* counts = routing.expert_counts_E.data<int64_t>();
  for (int64_t q = 0; q < n * kk; ++q) ++counts[expert[q]];
}

// dz_NE (moe_router.md): dp through the renormalisation, softmax backward, plus the caller's
// dlogits (null: none).
static void router_dz(const MoeRouterArgs& args, int64_t n, int64_t e, const float* dweight,
                      const float* extra, const MoeRouting& routing, float* dzp) {
  const int64_t kk = args.top_k;
  const float* probs = routing.probs_NE.data<float>();
  const int32_t* expert = routing.expert_NK.data<int32_t>();
  const float* weight = routing.weight_NK.data<float>();
  parallel_for(n, kTokenGrain, [&](int64_t begin, int64_t end) {
    std::vector<double> dp(static_cast<size_t>(e));
    for (int64_t t = begin; t < end; ++t) {
      const float* pt = probs + t * e;
      const int32_t* ex = expert + t * kk;
      const float* dw = dweight + t * kk;
      std::fill(dp.begin(), dp.end(), 0.0);
      if (args.norm_topk_prob) {
        double psum = 0.0, mean = 0.0;
        for (int64_t k = 0; k < kk; ++k) {
          psum += pt[ex[k]];
          mean += static_cast<double>(dw[k]) * weight[t * kk + k];
        }
        for (int64_t k = 0; k < kk; ++k) dp[ex[k]] = (dw[k] - mean) / psum;
      } else {
        for (int64_t k = 0; k < kk; ++k) dp[ex[k]] = dw[k];
      }
      double pdp = 0.0;
      for (int64_t j = 0; j < e; ++j) pdp += pt[j] * dp[j];
      for (int64_t j = 0; j < e; ++j) {
        double v = pt[j] * (dp[j] - pdp);
        if (extra != nullptr) v += extra[t * e + j];
        dzp[t * e + j] = static_cast<float>(v);
      }
    }
  });
}

static void backward_cpu(const MoeRouterArgs& args, const Tensor& dweight, const Tensor& dlogits,
                         const Tensor& x, const Tensor& w_gate, const MoeRouting& routing,
                         Tensor& dx, Tensor& dw_gate) {
  const int64_t n = x.size(0), d = x.size(1), e = w_gate.size(0);
  if (n == 0) return;
  Tensor dz = backward_dz(x, w_gate);
  float* dzp = dz.data<float>();
  router_dz(args, n, e, dweight.data<float>(), dlogits.defined() ? dlogits.data<float>() : nullptr,
            routing, dzp);
  gemm(false, false, n, d, e, 1.0f, dzp, e, w_gate.data<float>(), d, 0.0f, dx.data<float>(), d);
  gemm(true, false, e, d, n, 1.0f, dzp, e, x.data<float>(), d, 1.0f, dw_gate.data<float>(), d);
}

MoeRouterImpl moe_router_impl_cpu() {
  return {"moe_router_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu};
}

MoeRouterImpl moe_router_impl_meta() {
  const auto forward = [](const MoeRouterArgs& args, const Tensor& x, const Tensor& w_gate, Tensor&,
                          MoeRouting& routing) { allocate_routing(args, x, w_gate, routing); };
  const auto backward = [](const MoeRouterArgs&, const Tensor&, const Tensor&, const Tensor& x, const Tensor& w_gate,
                           const MoeRouting&, Tensor&, Tensor&) { (void)backward_dz(x, w_gate); };
  return {"moe_router_meta", Device::meta, nullptr, forward, backward};
}

}  // namespace titan::ops
