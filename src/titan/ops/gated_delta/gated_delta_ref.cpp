// Scalar reference for the gated delta rule: the sequential recurrence token by token, and its
// adjoint run backwards over the stored states (gated_delta.md), math in double.
#include <cmath>
#include <vector>

#include "titan/ops/gated_delta/gated_delta.h"

namespace titan::ops {
namespace ref {

namespace {

// Where each piece of a token's row lives (gated_delta.h's layout).
struct Layout {
  int64_t hk, dk, hv, dv, c, group;
  explicit Layout(const GatedDeltaArgs& a)
      : hk(a.k_heads), dk(a.k_dim), hv(a.v_heads), dv(a.v_dim), c(2 * a.k_heads * a.k_dim + a.v_heads * a.v_dim),
        group(a.v_heads / a.k_heads) {}
  int64_t q(int64_t row, int64_t key_head) const { return row * c + key_head * dk; }
  int64_t k(int64_t row, int64_t key_head) const { return row * c + (hk + key_head) * dk; }
  int64_t v(int64_t row, int64_t head) const { return row * c + 2 * hk * dk + head * dv; }
};

// x / sqrt(|x|^2 + eps) * scale, and the norm's inverse r = 1 / sqrt(|x|^2 + eps).
template <class T>
double l2_normalize(const T* x, int64_t n, double eps, double scale, double* out) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double r = 1.0 / std::sqrt(ss + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * r * scale;
  return r;
}

// Gradient of y = scale * x * r through the norm: dx = scale * r * (dy - x (x . dy) r^2).
template <class T>
void l2_normalize_backward(const T* x, int64_t n, double r, double scale, const double* dy, T* dx) {
  double dot = 0.0;
  for (int64_t i = 0; i < n; ++i) dot += x[i] * dy[i];
  for (int64_t i = 0; i < n; ++i) dx[i] = static_cast<T>(scale * r * (dy[i] - x[i] * dot * r * r));
}

}  // namespace

template <class T>
void gated_delta_forward(const GatedDeltaArgs& args, int64_t batch, int64_t tokens, const T* qkv, const T* g,
                         const T* beta, T* o, T* state) {
  const Layout L(args);
  const double scale = 1.0 / std::sqrt(static_cast<double>(L.dk));
  std::vector<double> S(L.dk * L.dv), qh(L.dk), kh(L.dk), u(L.dv);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < L.hv; ++h) {
      const int64_t key_head = h / L.group;
      T* s0 = state ? state + (b * L.hv + h) * L.dk * L.dv : nullptr;
      for (int64_t i = 0; i < L.dk * L.dv; ++i) S[i] = s0 ? static_cast<double>(s0[i]) : 0.0;
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t row = b * tokens + t;
        l2_normalize(qkv + L.q(row, key_head), L.dk, args.eps, scale, qh.data());
        l2_normalize(qkv + L.k(row, key_head), L.dk, args.eps, 1.0, kh.data());
        const T* v = qkv + L.v(row, h);
        const double a = std::exp(static_cast<double>(g[row * L.hv + h])), bt = beta[row * L.hv + h];
        for (double& s : S) s *= a;
        for (int64_t j = 0; j < L.dv; ++j) u[j] = 0.0;
        for (int64_t i = 0; i < L.dk; ++i) {
          for (int64_t j = 0; j < L.dv; ++j) u[j] += S[i * L.dv + j] * kh[i];
        }
        for (int64_t i = 0; i < L.dk; ++i) {
          for (int64_t j = 0; j < L.dv; ++j) S[i * L.dv + j] += kh[i] * bt * (v[j] - u[j]);
        }
        T* out = o + row * L.hv * L.dv + h * L.dv;
        for (int64_t j = 0; j < L.dv; ++j) {
          double acc = 0.0;
          for (int64_t i = 0; i < L.dk; ++i) acc += S[i * L.dv + j] * qh[i];
          out[j] = static_cast<T>(acc);
        }
      }
      if (s0) {
        for (int64_t i = 0; i < L.dk * L.dv; ++i) s0[i] = static_cast<T>(S[i]);
      }
    }
  }
}

template <class T>
void gated_delta_backward(const GatedDeltaArgs& args, int64_t batch, int64_t tokens, const T* d_o, const T* qkv,
                          const T* g, const T* beta, T* dqkv, T* dg, T* dbeta) {
  const Layout L(args);
  const int64_t dkdv = L.dk * L.dv;
  const double scale = 1.0 / std::sqrt(static_cast<double>(L.dk));
  std::vector<double> qh(tokens * L.dk), kh(tokens * L.dk), rq(tokens), rk(tokens);
  std::vector<double> dqh(tokens * L.dk), dkh(tokens * L.dk);
  std::vector<double> S((tokens + 1) * dkdv), r(tokens * L.dv), dS(dkdv), dd(L.dv), du(L.dv);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t key_head = 0; key_head < L.hk; ++key_head) {
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t row = b * tokens + t;
        rq[t] = l2_normalize(qkv + L.q(row, key_head), L.dk, args.eps, scale, &qh[t * L.dk]);
        rk[t] = l2_normalize(qkv + L.k(row, key_head), L.dk, args.eps, 1.0, &kh[t * L.dk]);
      }
      std::fill(dqh.begin(), dqh.end(), 0.0);
      std::fill(dkh.begin(), dkh.end(), 0.0);
      for (int64_t h = key_head * L.group; h < (key_head + 1) * L.group; ++h) {
        // Forward, keeping S_0 .. S_T and r_t = v_t - u_t (delta_t = beta_t r_t).
        std::fill(S.begin(), S.begin() + dkdv, 0.0);
        for (int64_t t = 0; t < tokens; ++t) {
          const int64_t row = b * tokens + t;
          const double a = std::exp(static_cast<double>(g[row * L.hv + h])), bt = beta[row * L.hv + h];
          const double* prev = &S[t * dkdv];
          double* next = &S[(t + 1) * dkdv];
          const double* k = &kh[t * L.dk];
          const T* v = qkv + L.v(row, h);
          double* rt = &r[t * L.dv];
          for (int64_t j = 0; j < L.dv; ++j) rt[j] = v[j];
          for (int64_t i = 0; i < L.dk; ++i) {
            for (int64_t j = 0; j < L.dv; ++j) rt[j] -= a * prev[i * L.dv + j] * k[i];
          }
          for (int64_t i = 0; i < L.dk; ++i) {
            for (int64_t j = 0; j < L.dv; ++j) next[i * L.dv + j] = a * prev[i * L.dv + j] + k[i] * bt * rt[j];
          }
        }
        // The adjoint, from the last token back (gated_delta.md).
        std::fill(dS.begin(), dS.end(), 0.0);
        for (int64_t t = tokens - 1; t >= 0; --t) {
          const int64_t row = b * tokens + t;
          const double a = std::exp(static_cast<double>(g[row * L.hv + h])), bt = beta[row * L.hv + h];
          const double* prev = &S[t * dkdv];
          const double* cur = &S[(t + 1) * dkdv];
          const double* q = &qh[t * L.dk];
          const double* k = &kh[t * L.dk];
          const double* rt = &r[t * L.dv];
          const T* dot = d_o + row * L.hv * L.dv + h * L.dv;
          for (int64_t i = 0; i < L.dk; ++i) {
            double acc = 0.0;
            for (int64_t j = 0; j < L.dv; ++j) {
              acc += cur[i * L.dv + j] * dot[j];
              dS[i * L.dv + j] += q[i] * dot[j];
            }
            dqh[t * L.dk + i] += acc;
          }
          for (int64_t j = 0; j < L.dv; ++j) dd[j] = 0.0;
          for (int64_t i = 0; i < L.dk; ++i) {
            double acc = 0.0;
            for (int64_t j = 0; j < L.dv; ++j) {
              dd[j] += dS[i * L.dv + j] * k[i];
              acc += dS[i * L.dv + j] * bt * rt[j];
            }
            dkh[t * L.dk + i] += acc;
          }
          double dbt = 0.0;
          T* dv = dqkv + L.v(row, h);
          for (int64_t j = 0; j < L.dv; ++j) {
            dbt += dd[j] * rt[j];
            dv[j] = static_cast<T>(bt * dd[j]);
            du[j] = -bt * dd[j];
          }
          dbeta[row * L.hv + h] = static_cast<T>(dbt);
          double dgt = 0.0;
          for (int64_t i = 0; i < L.dk; ++i) {
            double acc = 0.0;
            for (int64_t j = 0; j < L.dv; ++j) {
              acc += a * prev[i * L.dv + j] * du[j];
              const double dA = dS[i * L.dv + j] + k[i] * du[j];
              dgt += dA * a * prev[i * L.dv + j];
              dS[i * L.dv + j] = a * dA;
            }
            dkh[t * L.dk + i] += acc;
          }
          dg[row * L.hv + h] = static_cast<T>(dgt);
        }
      }
      for (int64_t t = 0; t < tokens; ++t) {
        const int64_t row = b * tokens + t;
        l2_normalize_backward(qkv + L.q(row, key_head), L.dk, rq[t], scale, &dqh[t * L.dk], dqkv + L.q(row, key_head));
        l2_normalize_backward(qkv + L.k(row, key_head), L.dk, rk[t], 1.0, &dkh[t * L.dk], dqkv + L.k(row, key_head));
      }
    }
  }
}

template void gated_delta_forward<float>(const GatedDeltaArgs&, int64_t, int64_t, const float*, const float*,
                                         const float*, float*, float*);
template void gated_delta_forward<double>(const GatedDeltaArgs&, int64_t, int64_t, const double*, const double*,
                                          const double*, double*, double*);
template void gated_delta_backward<float>(const GatedDeltaArgs&, int64_t, int64_t, const float*, const float*,
                                          const float*, const float*, float*, float*, float*);
template void gated_delta_backward<double>(const GatedDeltaArgs&, int64_t, int64_t, const double*, const double*,
                                           const double*, const double*, double*, double*, double*);

}  // namespace ref

static void forward_ref(const GatedDeltaArgs& args, const Tensor& qkv, const Tensor& g, const Tensor& beta, Tensor& o,
                        Tensor& state) {
  ref::gated_delta_forward(args, qkv.size(0), qkv.size(1), qkv.data<float>(), g.data<float>(), beta.data<float>(),
                           o.data<float>(), state.defined() ? state.data<float>() : nullptr);
}

static void backward_ref(const GatedDeltaArgs& args, const Tensor& d_o, const Tensor& qkv, const Tensor& g,
                         const Tensor& beta, Tensor& dqkv, Tensor& dg, Tensor& dbeta) {
  ref::gated_delta_backward(args, qkv.size(0), qkv.size(1), d_o.data<float>(), qkv.data<float>(), g.data<float>(),
                            beta.data<float>(), dqkv.data<float>(), dg.data<float>(), dbeta.data<float>());
}

GatedDeltaImpl gated_delta_impl_ref() { return {"gated_delta_ref", Device::cpu, nullptr, forward_ref, backward_ref}; }

}  // namespace titan::ops
