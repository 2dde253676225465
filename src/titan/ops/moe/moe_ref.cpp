// Scalar reference for the sparse MoE block: per token, plain loops over its chosen experts,
// math in double. Backward recomputes each expert's activations instead of reading saved ones.
#include <algorithm>
#include <cmath>
#include <vector>

#include "titan/ops/moe/moe.h"
#include "titan/ops/scalar_math.h"

namespace titan::ops {
namespace ref {

// Router of one token: logits, softmax probs (double), and the top-k by logit (softmax is
// monotonic, so this is the top-k by prob without ties that rounding of the probs would create),
// or by prob + bias when a selection bias is given; ties to the lower expert index.
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

// One expert on one token: g = w1 x, u = w3 x, h = silu(g) * u (all length f).
template <class T>
static void expert_hidden(int64_t d, int64_t f, const T* x, const T* w1, const T* w3,
                          std::vector<double>& g, std::vector<double>& u, std::vector<double>& h) {
  for (int64_t o = 0; o < f; ++o) {
    double ag = 0.0, au = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      ag += static_cast<double>(w1[o * d + i]) * x[i];
      au += static_cast<double>(w3[o * d + i]) * x[i];
    }
    g[o] = ag;
    u[o] = au;
    h[o] = ag * sigmoid(ag) * au;
  }
}

template <class T>
void moe_forward(int64_t n, int64_t d, int64_t e, int64_t f, int64_t top_k, bool norm_topk_prob,
                 const T* x, const T* w_gate, const T* w1, const T* w3, const T* w2, T* out,
                 T* logits, T* probs, int32_t* expert, T* weight, const float* selection_bias) {
  std::vector<double> p(e), g(f), u(f), h(f);
  for (int64_t t = 0; t < n; ++t) {
    const T* xt = x + t * d;
    int32_t* ex = expert + t * top_k;
    route_token(d, e, top_k, xt, w_gate, selection_bias, logits + t * e, p, ex);
    for (int64_t j = 0; j < e; ++j) probs[t * e + j] = static_cast<T>(p[j]);
    double psum = 0.0;
    for (int64_t k = 0; k < top_k; ++k) psum += p[ex[k]];
    std::vector<double> y(d, 0.0);
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t ek = ex[k];
      const double wk = norm_topk_prob ? p[ek] / psum : p[ek];
      weight[t * top_k + k] = static_cast<T>(wk);
      expert_hidden(d, f, xt, w1 + ek * f * d, w3 + ek * f * d, g, u, h);
      for (int64_t i = 0; i < d; ++i) {
        double acc = 0.0;
        for (int64_t o = 0; o < f; ++o) acc += static_cast<double>(w2[(ek * d + i) * f + o]) * h[o];
        y[i] += wk * acc;
      }
    }
    for (int64_t i = 0; i < d; ++i) out[t * d + i] = static_cast<T>(y[i]);
  }
}

// Per token (moe.md): dw_k = dout . y_k; dh_k = w_k w2^T dout; SwiGLU backward; dx and the
// expert weight grads; then the router: dp through the renormalisation, softmax backward.
template <class T>
void moe_backward(int64_t n, int64_t d, int64_t e, int64_t f, int64_t top_k, bool norm_topk_prob,
                  const T* dout, const T* dlogits, const T* x, const T* w_gate, const T* w1,
                  const T* w3, const T* w2, const T* probs, const int32_t* expert,
                  const T* weight, T* dx, T* dw_gate, T* dw1, T* dw3, T* dw2) {
  std::vector<double> g(f), u(f), h(f), dh(f), dxt(d), dweight(top_k), dp(e);
  for (int64_t t = 0; t < n; ++t) {
    const T* xt = x + t * d;
    const T* dot = dout + t * d;
    const int32_t* ex = expert + t * top_k;
    std::fill(dxt.begin(), dxt.end(), 0.0);
    for (int64_t k = 0; k < top_k; ++k) {
      const int64_t ek = ex[k];
      const double wk = weight[t * top_k + k];
      const T* w1e = w1 + ek * f * d;
      const T* w3e = w3 + ek * f * d;
      const T* w2e = w2 + ek * d * f;
      expert_hidden(d, f, xt, w1e, w3e, g, u, h);
      // dweight_k = dout . (w2 h);  dh = wk * w2^T dout;  dw2 += (wk dout) h^T
      double dwk = 0.0;
      for (int64_t o = 0; o < f; ++o) dh[o] = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        double yi = 0.0;
        for (int64_t o = 0; o < f; ++o) {
          yi += static_cast<double>(w2e[i * f + o]) * h[o];
          dh[o] += static_cast<double>(w2e[i * f + o]) * dot[i];
        }
        dwk += yi * dot[i];
        for (int64_t o = 0; o < f; ++o)
          dw2[(ek * d + i) * f + o] += static_cast<T>(wk * dot[i] * h[o]);
      }
      dweight[k] = dwk;
      for (int64_t o = 0; o < f; ++o) {
        const double s = sigmoid(g[o]), dho = wk * dh[o];
        const double dg = dho * u[o] * s * (1.0 + g[o] * (1.0 - s));
        const double du = dho * g[o] * s;
        for (int64_t i = 0; i < d; ++i) {
          dxt[i] += dg * w1e[o * d + i] + du * w3e[o * d + i];
          dw1[(ek * f + o) * d + i] += static_cast<T>(dg * xt[i]);
          dw3[(ek * f + o) * d + i] += static_cast<T>(du * xt[i]);
        }
      }
    }
    // Router. weight_k = p_k / S (S = sum of the chosen p) when normalised, else p_k:
    //   dp_k = (dweight_k - sum_j dweight_j weight_j) / S, or dweight_k; 0 for unchosen experts.
    std::fill(dp.begin(), dp.end(), 0.0);
    const T* pt = probs + t * e;
    if (norm_topk_prob) {
      double psum = 0.0, mean = 0.0;
      for (int64_t k = 0; k < top_k; ++k) psum += pt[ex[k]];
      for (int64_t k = 0; k < top_k; ++k) mean += dweight[k] * weight[t * top_k + k];
      for (int64_t k = 0; k < top_k; ++k) dp[ex[k]] = (dweight[k] - mean) / psum;
    } else {
      for (int64_t k = 0; k < top_k; ++k) dp[ex[k]] = dweight[k];
    }
    // Softmax backward: dz_j = p_j (dp_j - sum_i p_i dp_i), plus the caller's dlogits.
    double pdp = 0.0;
    for (int64_t j = 0; j < e; ++j) pdp += static_cast<double>(pt[j]) * dp[j];
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

#define TITAN_MOE_REF_INSTANTIATE(T)                                                              \
  template void moe_forward<T>(int64_t, int64_t, int64_t, int64_t, int64_t, bool, const T*,        \
                               const T*, const T*, const T*, const T*, T*, T*, T*, int32_t*, T*,   \
                               const float*);                                                     \
  template void moe_backward<T>(int64_t, int64_t, int64_t, int64_t, int64_t, bool, const T*,       \
                                const T*, const T*, const T*, const T*, const T*, const T*,        \
                                const T*, const int32_t*, const T*, T*, T*, T*, T*, T*);
TITAN_MOE_REF_INSTANTIATE(float)
TITAN_MOE_REF_INSTANTIATE(double)
#undef TITAN_MOE_REF_INSTANTIATE

}  // namespace ref

// The float entry points also write the dispatch layout and the saved expert pre-activations
// (the contract's MoeSaved), with plain loops: rows grouped by expert, (token, k) ascending.
void moe_forward_ref(const MoeArgs& args, const Tensor& x, const Tensor& w_gate, const Tensor& w1,
                     const Tensor& w3, const Tensor& w2, Tensor& out, Tensor& logits,
                     MoeSaved& saved) {
  const int64_t n = x.size(0), d = x.size(1), e = w_gate.size(0), f = w1.size(1);
  const int64_t kk = args.top_k, p = n * kk;
  saved.probs_NE = Tensor::empty({n, e});
  saved.expert_NK = Tensor::empty({n, kk}, DType::i32);
  saved.weight_NK = Tensor::empty({n, kk});
  ref::moe_forward(n, d, e, f, kk, args.norm_topk_prob, x.data<float>(), w_gate.data<float>(),
                   w1.data<float>(), w3.data<float>(), w2.data<float>(), out.data<float>(),
                   logits.data<float>(), saved.probs_NE.data<float>(),
                   saved.expert_NK.data<int32_t>(), saved.weight_NK.data<float>(),
                   args.selection_bias_E.defined() ? args.selection_bias_E.data<float>() : nullptr);
  saved.expert_counts_E = Tensor::zeros({e}, DType::i64);
  saved.offsets_E1 = Tensor::empty({e + 1}, DType::i64);
  saved.row_of_pair_NK = Tensor::empty({n, kk}, DType::i32);
  saved.pair_of_row_P = Tensor::empty({p}, DType::i32);
  saved.gate_PF = Tensor::empty({p, f});
  saved.up_PF = Tensor::empty({p, f});
  const int32_t* ex = saved.expert_NK.data<int32_t>();
  int64_t* counts = saved.expert_counts_E.data<int64_t>();
  int64_t* offsets = saved.offsets_E1.data<int64_t>();
  int32_t* row_of_pair = saved.row_of_pair_NK.data<int32_t>();
  int32_t* pair_of_row = saved.pair_of_row_P.data<int32_t>();
  const float* xp = x.data<float>();
  std::vector<double> g(f), u(f), h(f);
  int64_t row = 0;
  for (int64_t j = 0; j < e; ++j) {
    offsets[j] = row;
    for (int64_t q = 0; q < p; ++q) {
      if (ex[q] != j) continue;
      row_of_pair[q] = static_cast<int32_t>(row);
      pair_of_row[row] = static_cast<int32_t>(q);
      ref::expert_hidden(d, f, xp + (q / kk) * d, w1.data<float>() + j * f * d,
                         w3.data<float>() + j * f * d, g, u, h);
      for (int64_t o = 0; o < f; ++o) {
        saved.gate_PF.data<float>()[row * f + o] = static_cast<float>(g[o]);
        saved.up_PF.data<float>()[row * f + o] = static_cast<float>(u[o]);
      }
      ++counts[j];
      ++row;
    }
  }
  offsets[e] = row;
}

void moe_backward_ref(const MoeArgs& args, const Tensor& dout, const Tensor& dlogits,
                      const Tensor& x, const Tensor& w_gate, const Tensor& w1, const Tensor& w3,
                      const Tensor& w2, const MoeSaved& saved, Tensor& dx, Tensor& dw_gate,
                      Tensor& dw1, Tensor& dw3, Tensor& dw2) {
  const int64_t n = x.size(0), d = x.size(1), e = w_gate.size(0), f = w1.size(1);
  ref::moe_backward(n, d, e, f, args.top_k, args.norm_topk_prob, dout.data<float>(),
                    dlogits.defined() ? dlogits.data<float>() : nullptr, x.data<float>(),
                    w_gate.data<float>(), w1.data<float>(), w3.data<float>(), w2.data<float>(),
                    saved.probs_NE.data<float>(), saved.expert_NK.data<int32_t>(),
                    saved.weight_NK.data<float>(), dx.data<float>(), dw_gate.data<float>(),
                    dw1.data<float>(), dw3.data<float>(), dw2.data<float>());
}

}  // namespace titan::ops
