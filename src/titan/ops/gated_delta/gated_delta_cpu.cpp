// The gated delta rule on CPU. One task per (batch row, key head): the normalised q / k of its
// tokens once, then each value head of the group in turn. Forward: the chunked (WY) form,
// `chunk` tokens at a time (gated_delta.md). Backward: the chunked forward again, keeping the
// state at each chunk's start; then chunk by chunk from the last, the chunk's states recomputed
// token by token from its start and the adjoint run back over them. Scratch lives per task on the
// host heap: 4 T Dk for q / k and their gradients, (T / chunk + chunk + 1) Dk Dv states.
#include <cmath>
#include <vector>

#include "titan/core/aligned_vector.h"
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/gated_delta/gated_delta.h"

namespace titan::ops {

namespace {

struct Dims {
  int64_t hk, dk, hv, dv, c, group, tokens, chunk;
  Dims(const GatedDeltaArgs& a, int64_t t)
      : hk(a.k_heads), dk(a.k_dim), hv(a.v_heads), dv(a.v_dim), c(2 * a.k_heads * a.k_dim + a.v_heads * a.v_dim),
        group(a.v_heads / a.k_heads), tokens(t), chunk(a.chunk) {}
};

// The q (scaled by 1 / sqrt(Dk)) and k rows of one key head, normalised, [T, Dk]; r: 1 / norm.
void normalize_rows(const Dims& d, const float* qkv_b, int64_t offset, float eps, float scale, float* out,
                    float* r) {
  for (int64_t t = 0; t < d.tokens; ++t) {
    const float* x = qkv_b + t * d.c + offset;
    float ss = 0.0f;
    for (int64_t i = 0; i < d.dk; ++i) ss += x[i] * x[i];
    r[t] = 1.0f / std::sqrt(ss + eps);
    for (int64_t i = 0; i < d.dk; ++i) out[t * d.dk + i] = x[i] * r[t] * scale;
  }
}

void normalize_rows_backward(const Dims& d, const float* qkv_b, int64_t offset, float scale, const float* r,
                             const float* dy, float* dqkv_b) {
  for (int64_t t = 0; t < d.tokens; ++t) {
    const float* x = qkv_b + t * d.c + offset;
    const float* g = dy + t * d.dk;
    float dot = 0.0f;
    for (int64_t i = 0; i < d.dk; ++i) dot += x[i] * g[i];
    float* dx = dqkv_b + t * d.c + offset;
    const float rr = r[t] * r[t];
    for (int64_t i = 0; i < d.dk; ++i) dx[i] = scale * r[t] * (g[i] - x[i] * dot * rr);
  }
}

// Per-chunk scratch of the WY form.
struct ChunkScratch {
  AlignedVector<float> gamma, W, QK;
  explicit ChunkScratch(const Dims& d)
      : gamma(d.chunk), W(d.chunk * d.dv), QK(d.chunk) {}
};

// One chunk of n tokens of one value head, starting at token t0: o's rows (when `o` is not null)
// and the state S [Dk, Dv] carried over the chunk (gated_delta.md, "Chunked form").
//   qh, kh: the head's normalised rows from t0; v: rows with stride c; g, beta, o: stride hv / hv dv.
TITAN_SIMD_KERNEL(void, chunk_forward, (const Dims& d, int64_t n, const float* qh, const float* kh, const float* v,
                                       const float* g, const float* beta, float* S, float* o, ChunkScratch& w),
                  (d, n, qh, kh, v, g, beta, S, o, w)) {
  const int64_t dk = d.dk, dv = d.dv;
  float* gamma = w.gamma.data();
  float* W = w.W.data();
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) gamma[i] = acc += g[i * d.hv];
  // (I + L) v_new = beta (v - exp(gamma) S^T k), L strictly lower: forward substitution
  // (gated_delta.md, "Chunked form").
  for (int64_t i = 0; i < n; ++i) {
    const float* ki = kh + i * dk;
    const float bi = beta[i * d.hv];
    float* wi = W + i * dv;
    const float* vi = v + i * d.c;
    const float ei = std::exp(gamma[i]);
    for (int64_t x = 0; x < dv; ++x) wi[x] = vi[x];
    for (int64_t k = 0; k < dk; ++k) {
      const float c = ei * ki[k];
      const float* sk = S + k * dv;
      for (int64_t x = 0; x < dv; ++x) wi[x] -= c * sk[x];
    }
    for (int64_t x = 0; x < dv; ++x) wi[x] *= bi;
    for (int64_t j = 0; j < i; ++j) {
      const float* kj = kh + j * dk;
      float dot = 0.0f;
      for (int64_t x = 0; x < dk; ++x) dot += ki[x] * kj[x];
      const float lij = bi * dot * std::exp(gamma[i] - gamma[j]);
      const float* wj = W + j * dv;
      for (int64_t x = 0; x < dv; ++x) wi[x] -= lij * wj[x];
    }
  }
  if (o != nullptr) {
    float* qk = w.QK.data();
    for (int64_t i = 0; i < n; ++i) {
      const float* qi = qh + i * dk;
      float* oi = o + i * d.hv * dv;
      const float ei = std::exp(gamma[i]);
      for (int64_t x = 0; x < dv; ++x) oi[x] = 0.0f;
      for (int64_t k = 0; k < dk; ++k) {
        const float c = ei * qi[k];
        const float* sk = S + k * dv;
        for (int64_t x = 0; x < dv; ++x) oi[x] += c * sk[x];
      }
      for (int64_t j = 0; j <= i; ++j) {
        const float* kj = kh + j * dk;
        float dot = 0.0f;
        for (int64_t x = 0; x < dk; ++x) dot += qi[x] * kj[x];
        qk[j] = dot * std::exp(gamma[i] - gamma[j]);
      }
      for (int64_t j = 0; j <= i; ++j) {
        const float c = qk[j];
        const float* wj = W + j * dv;
        for (int64_t x = 0; x < dv; ++x) oi[x] += c * wj[x];
      }
    }
  }
  // S = exp(gamma_n) S + sum_j exp(gamma_n - gamma_j) k_j v_new_j^T.
  const float last = gamma[n - 1], en = std::exp(last);
  for (int64_t k = 0; k < dk; ++k) {
    float* sk = S + k * dv;
    for (int64_t x = 0; x < dv; ++x) sk[x] *= en;
    for (int64_t j = 0; j < n; ++j) {
      const float c = kh[j * dk + k] * std::exp(last - gamma[j]);
      const float* wj = W + j * dv;
      for (int64_t x = 0; x < dv; ++x) sk[x] += c * wj[x];
    }
  }
}

// The backward writes each rounding out (std::fma where a product is fused, rounded_product where
// it is not: simd.h), the roundings GCC's AVX-512 code gave at head widths that are multiples of 16,
// so that the AVX2 and the AVX-512 code agree at every width (gated_delta.md).
using kernels::rounded_product;

// The adjoint over one chunk of n tokens, last token first (gated_delta.md, "Backward"): the
// chunk's states st[0 .. n] recomputed from its start st[0], then dS carried back through them.
// dqh, dkh accumulate (+=, summed over the value heads of a key head); dv, dg, dbeta are written.
TITAN_SIMD_KERNEL(void, chunk_backward, (const Dims& d, int64_t n, const float* qh, const float* kh, const float* v,
                                        const float* g, const float* beta, const float* d_o, float* st, float* r,
                                        float* dS, float* dd, float* dqh, float* dkh, float* dv_out, float* dg,
                                        float* dbeta),
                  (d, n, qh, kh, v, g, beta, d_o, st, r, dS, dd, dqh, dkh, dv_out, dg, dbeta)) {
  const int64_t dk = d.dk, dv = d.dv, dkdv = dk * dv;
  for (int64_t i = 0; i < n; ++i) {
    const float a = std::exp(g[i * d.hv]), bi = beta[i * d.hv];
    const float* prev = st + i * dkdv;
    float* next = st + (i + 1) * dkdv;
    const float* ki = kh + i * dk;
    float* ri = r + i * dv;
    const float* vi = v + i * d.c;
    for (int64_t x = 0; x < dv; ++x) ri[x] = vi[x];
    for (int64_t k = 0; k < dk; ++k) {
      const float c = a * ki[k];
      const float* pk = prev + k * dv;
      for (int64_t x = 0; x < dv; ++x) ri[x] = std::fma(-c, pk[x], ri[x]);
    }
    for (int64_t k = 0; k < dk; ++k) {
      const float c = ki[k] * bi;
      const float* pk = prev + k * dv;
      float* nk = next + k * dv;
      for (int64_t x = 0; x < dv; ++x) nk[x] = std::fma(a, pk[x], c * ri[x]);
    }
  }
  for (int64_t i = n - 1; i >= 0; --i) {
    const float a = std::exp(g[i * d.hv]), bi = beta[i * d.hv];
    const float* prev = st + i * dkdv;
    const float* cur = st + (i + 1) * dkdv;
    const float* qi = qh + i * dk;
    const float* ki = kh + i * dk;
    const float* ri = r + i * dv;
    const float* doi = d_o + i * d.hv * dv;
    float* dqi = dqh + i * dk;
    float* dki = dkh + i * dk;
    // o = S_t^T q: dq += S_t do, dS += q do^T.
    for (int64_t k = 0; k < dk; ++k) {
      const float* ck = cur + k * dv;
      float* dsk = dS + k * dv;
      float acc = 0.0f;
      for (int64_t x = 0; x < dv; ++x) {
        acc += rounded_product(ck[x], doi[x]);
        dsk[x] = std::fma(qi[k], doi[x], dsk[x]);
      }
      dqi[k] += acc;
    }
    // S_t = A + k delta^T: d delta = dS^T k, dk += dS delta.
    for (int64_t x = 0; x < dv; ++x) dd[x] = 0.0f;
    for (int64_t k = 0; k < dk; ++k) {
      const float* dsk = dS + k * dv;
      const float c = ki[k];
      float acc = 0.0f;
      for (int64_t x = 0; x < dv; ++x) {
        dd[x] = std::fma(dsk[x], c, dd[x]);
        acc += rounded_product(dsk[x], ri[x]);
      }
      dki[k] = std::fma(bi, acc, dki[k]);
    }
    // delta = beta (v - A^T k): dbeta, dv, and du = -beta d delta (dd now holds du).
    float dbt = 0.0f;
    float* dvi = dv_out + i * d.c;
    for (int64_t x = 0; x < dv; ++x) {
      dbt += rounded_product(dd[x], ri[x]);
      dvi[x] = bi * dd[x];
      dd[x] = -bi * dd[x];
    }
    dbeta[i * d.hv] = dbt;
    // u = A^T k, A = a S_{t-1}: dA = dS + k du^T, dk += A du, dg = <dA, A>, dS_{t-1} = a dA.
    float dgt = 0.0f;
    for (int64_t k = 0; k < dk; ++k) {
      const float* pk = prev + k * dv;
      float* dsk = dS + k * dv;
      const float c = ki[k];
      float acc = 0.0f, dot = 0.0f;
      for (int64_t x = 0; x < dv; ++x) {
        acc += rounded_product(pk[x], dd[x]);
        const float dA = std::fma(c, dd[x], dsk[x]);
        dot += rounded_product(dA, pk[x]);
        dsk[x] = a * dA;
      }
      dki[k] = std::fma(a, acc, dki[k]);
      dgt = std::fma(a, dot, dgt);
    }
    dg[i * d.hv] = dgt;
  }
}

void forward_cpu(const GatedDeltaArgs& args, const Tensor& qkv, const Tensor& g, const Tensor& beta, Tensor& o,
                 Tensor& state) {
  const Dims d(args, qkv.size(1));
  const int64_t batch = qkv.size(0), dkdv = d.dk * d.dv;
  if (d.tokens == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.dk));
  parallel_for_each_dynamic(batch * d.hk, [&](int64_t task) {
    const int64_t b = task / d.hk, key_head = task % d.hk;
    const float* qkv_b = qkv.data<float>() + b * d.tokens * d.c;
    AlignedVector<float> qh(d.tokens * d.dk), kh(d.tokens * d.dk), r(d.tokens), S(dkdv);
    normalize_rows(d, qkv_b, key_head * d.dk, args.eps, scale, qh.data(), r.data());
    normalize_rows(d, qkv_b, (d.hk + key_head) * d.dk, args.eps, 1.0f, kh.data(), r.data());
    ChunkScratch w(d);
    for (int64_t h = key_head * d.group; h < (key_head + 1) * d.group; ++h) {
      float* s0 = state.defined() ? state.data<float>() + (b * d.hv + h) * dkdv : nullptr;
      if (s0) {
        std::copy(s0, s0 + dkdv, S.begin());
      } else {
        std::fill(S.begin(), S.end(), 0.0f);
      }
      const int64_t gate0 = b * d.tokens * d.hv + h;
      for (int64_t t0 = 0; t0 < d.tokens; t0 += d.chunk) {
        const int64_t n = std::min(d.chunk, d.tokens - t0);
        chunk_forward(d, n, qh.data() + t0 * d.dk, kh.data() + t0 * d.dk,
                      qkv_b + t0 * d.c + 2 * d.hk * d.dk + h * d.dv, g.data<float>() + gate0 + t0 * d.hv,
                      beta.data<float>() + gate0 + t0 * d.hv, S.data(),
                      o.data<float>() + (b * d.tokens + t0) * d.hv * d.dv + h * d.dv, w);
      }
      if (s0) std::copy(S.begin(), S.end(), s0);
    }
  });
}

void backward_cpu(const GatedDeltaArgs& args, const Tensor& d_o, const Tensor& qkv, const Tensor& g,
                  const Tensor& beta, Tensor& dqkv, Tensor& dg, Tensor& dbeta) {
  const Dims d(args, qkv.size(1));
  const int64_t batch = qkv.size(0), dkdv = d.dk * d.dv;
  if (d.tokens == 0) return;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d.dk));
  const int64_t chunks = (d.tokens + d.chunk - 1) / d.chunk;
  parallel_for_each_dynamic(batch * d.hk, [&](int64_t task) {
    const int64_t b = task / d.hk, key_head = task % d.hk;
    const float* qkv_b = qkv.data<float>() + b * d.tokens * d.c;
    float* dqkv_b = dqkv.data<float>() + b * d.tokens * d.c;
    AlignedVector<float> qh(d.tokens * d.dk), kh(d.tokens * d.dk), rq(d.tokens), rk(d.tokens);
    AlignedVector<float> dqh(d.tokens * d.dk, 0.0f), dkh(d.tokens * d.dk, 0.0f);
    AlignedVector<float> starts(chunks * dkdv), st((d.chunk + 1) * dkdv), r(d.chunk * d.dv), dS(dkdv), dd(d.dv);
    normalize_rows(d, qkv_b, key_head * d.dk, args.eps, scale, qh.data(), rq.data());
    normalize_rows(d, qkv_b, (d.hk + key_head) * d.dk, args.eps, 1.0f, kh.data(), rk.data());
    ChunkScratch w(d);
    for (int64_t h = key_head * d.group; h < (key_head + 1) * d.group; ++h) {
      const int64_t gate0 = b * d.tokens * d.hv + h;
      const float* v = qkv_b + 2 * d.hk * d.dk + h * d.dv;
      // The state at each chunk's start (the first is S_0 = 0).
      std::fill(starts.begin(), starts.begin() + dkdv, 0.0f);
      for (int64_t c = 0; c + 1 < chunks; ++c) {
        const int64_t t0 = c * d.chunk;
        std::copy(starts.begin() + c * dkdv, starts.begin() + (c + 1) * dkdv, starts.begin() + (c + 1) * dkdv);
        chunk_forward(d, d.chunk, qh.data() + t0 * d.dk, kh.data() + t0 * d.dk, v + t0 * d.c,
                      g.data<float>() + gate0 + t0 * d.hv, beta.data<float>() + gate0 + t0 * d.hv,
                      starts.data() + (c + 1) * dkdv, nullptr, w);
      }
      std::fill(dS.begin(), dS.end(), 0.0f);
      for (int64_t c = chunks - 1; c >= 0; --c) {
        const int64_t t0 = c * d.chunk, n = std::min(d.chunk, d.tokens - t0);
        std::copy(starts.begin() + c * dkdv, starts.begin() + (c + 1) * dkdv, st.begin());
        chunk_backward(d, n, qh.data() + t0 * d.dk, kh.data() + t0 * d.dk, v + t0 * d.c,
                       g.data<float>() + gate0 + t0 * d.hv, beta.data<float>() + gate0 + t0 * d.hv,
                       d_o.data<float>() + (b * d.tokens + t0) * d.hv * d.dv + h * d.dv, st.data(), r.data(),
                       dS.data(), dd.data(), dqh.data() + t0 * d.dk, dkh.data() + t0 * d.dk,
                       dqkv_b + t0 * d.c + 2 * d.hk * d.dk + h * d.dv, dg.data<float>() + gate0 + t0 * d.hv,
                       dbeta.data<float>() + gate0 + t0 * d.hv);
      }
    }
    normalize_rows_backward(d, qkv_b, key_head * d.dk, scale, rq.data(), dqh.data(), dqkv_b);
    normalize_rows_backward(d, qkv_b, (d.hk + key_head) * d.dk, 1.0f, rk.data(), dkh.data(), dqkv_b);
  });
}

}  // namespace

GatedDeltaImpl gated_delta_impl_cpu() { return {"gated_delta_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu}; }

}  // namespace titan::ops
