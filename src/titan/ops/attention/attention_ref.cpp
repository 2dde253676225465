// Scalar reference for GQA attention (causal with offsets, or full): one query row at a time,
// accumulation in double, O(Tk) scratch per row (the row's probabilities), never a [Tq, Tk] matrix.
#include <cmath>
#include <limits>
#include <vector>

#include "titan/core/dtype.h"
#include "titan/ops/attention/attention.h"

namespace titan::ops {
namespace ref {

// x, or x rounded to bf16 (from its f32 value) when `bf16`: the rounding rule of attention.h.
template <class T>
static double rd(T x, bool bf16) {
  return bf16 ? static_cast<double>(bf16_to_f32(f32_to_bf16(static_cast<float>(x)))) : static_cast<double>(x);
}

// Row offset of (bi, ti, hi) in a [b, t, heads, width] layout.
static int64_t row(int64_t bi, int64_t ti, int64_t hi, int64_t t, int64_t heads, int64_t width) {
  return ((bi * t + ti) * heads + hi) * width;
}

template <class T>
void attention_forward(const AttentionSizes& n, double scale, const AttentionArgs& args, const T* q,
                       const T* key, const T* v, T* out, T* lse) {
  const bool bf16 = args.compute == DType::bf16;
  const int64_t group = n.h / n.g;  // query heads per kv head
  const double ln2 = std::log(2.0);
  std::vector<double> p(static_cast<size_t>(n.tk)), p_op(static_cast<size_t>(n.tk));
  for (int64_t bi = 0; bi < n.b; ++bi) {
    for (int64_t hi = 0; hi < n.h; ++hi) {
      const int64_t gi = hi / group;
      for (int64_t i = 0; i < n.tq; ++i) {
        const T* qi = q + row(bi, i, hi, n.tq, n.h, n.k);
        T* oi = out + row(bi, i, hi, n.tq, n.h, n.kv);
        const int64_t visible = attention_visible_keys(args, i, n.tk);  // keys [0, visible)
        if (visible == 0) {  // nothing to attend to: out 0, lse -inf
          for (int64_t c = 0; c < n.kv; ++c) oi[c] = T(0);
          lse[(bi * n.h + hi) * n.tq + i] = -std::numeric_limits<T>::infinity();
          continue;
        }
        // Scores s_j = scale * q_i . k_j over the visible keys.
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          const T* kj = key + row(bi, j, gi, n.tk, n.g, n.k);
          double s = 0.0;
          for (int64_t c = 0; c < n.k; ++c) s += rd(qi[c], bf16) * rd(kj[c], bf16);
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        // Max-subtracted softmax. In bf16 the offset is the max rounded up to a multiple of ln 2
        // (so that rounding exp(S - m) is the rounding of exp(S) itself), and the normaliser is
        // the sum of the unrounded terms.
        if (bf16) m = ln2 * std::ceil(m / ln2);
        double sum = 0.0;
        for (int64_t j = 0; j < visible; ++j) {
          p[j] = std::exp(p[j] - m);
          sum += p[j];
          p_op[j] = rd(p[j], bf16);
        }
        for (int64_t c = 0; c < n.kv; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j < visible; ++j) acc += p_op[j] * rd(v[row(bi, j, gi, n.tk, n.g, n.kv) + c], bf16);
          oi[c] = static_cast<T>(acc / sum);
        }
        lse[(bi * n.h + hi) * n.tq + i] = static_cast<T>(m + std::log(sum));
      }
    }
  }
}

template <class T>
void attention_backward(const AttentionSizes& n, double scale, const AttentionArgs& args, const T* dout,
                        const T* dlse, const T* q, const T* key, const T* v, const T* out, const T* lse,
                        T* dq, T* dkey, T* dv) {
  const bool bf16 = args.compute == DType::bf16;
  const int64_t group = n.h / n.g;
  // dk and dv collect contributions from every query row; accumulate them in double.
  std::vector<double> dk_acc(static_cast<size_t>(n.b * n.tk * n.g * n.k), 0.0);
  std::vector<double> dv_acc(static_cast<size_t>(n.b * n.tk * n.g * n.kv), 0.0);
  std::vector<double> p(static_cast<size_t>(n.tk)), ds(static_cast<size_t>(n.tk));
  for (int64_t bi = 0; bi < n.b; ++bi) {
    for (int64_t hi = 0; hi < n.h; ++hi) {
      const int64_t gi = hi / group;
      for (int64_t i = 0; i < n.tq; ++i) {
        const int64_t qrow = row(bi, i, hi, n.tq, n.h, n.k), orow = row(bi, i, hi, n.tq, n.h, n.kv);
        const T* qi = q + qrow;
        const T* doi = dout + orow;
        const T* oi = out + orow;
        const int64_t li = (bi * n.h + hi) * n.tq + i;
        const double lse_i = lse[li];
        const int64_t visible = attention_visible_keys(args, i, n.tk);
        // D_i = dout_i . out_i  (= sum_j P_ij dP_ij), less dlse_i: lse_i's gradient adds
        // P_ij dlse_i to dS_ij (d lse_i / d S_ij = P_ij).
        double d_i = 0.0;
        for (int64_t c = 0; c < n.kv; ++c) d_i += rd(doi[c], bf16) * oi[c];
        if (dlse != nullptr) d_i -= dlse[li];
        for (int64_t j = 0; j < visible; ++j) {
          const int64_t krow = row(bi, j, gi, n.tk, n.g, n.k), vrow = row(bi, j, gi, n.tk, n.g, n.kv);
          double s = 0.0, dp = 0.0;
          for (int64_t c = 0; c < n.k; ++c) s += rd(qi[c], bf16) * rd(key[krow + c], bf16);
          for (int64_t c = 0; c < n.kv; ++c) dp += rd(doi[c], bf16) * rd(v[vrow + c], bf16);
          // P_ij, recomputed from the saved lse, and dS_ij = P_ij (dP_ij - D_i); as operands of
          // the products below both are rounded in bf16.
          const double pj = std::exp(s * scale - lse_i);
          p[j] = rd(pj, bf16);
          ds[j] = rd(pj * (dp - d_i), bf16);
        }
        T* dqi = dq + qrow;
        for (int64_t c = 0; c < n.k; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j < visible; ++j) acc += ds[j] * rd(key[row(bi, j, gi, n.tk, n.g, n.k) + c], bf16);
          dqi[c] = static_cast<T>(acc * scale);
        }
        for (int64_t j = 0; j < visible; ++j) {
          const int64_t krow = row(bi, j, gi, n.tk, n.g, n.k), vrow = row(bi, j, gi, n.tk, n.g, n.kv);
          for (int64_t c = 0; c < n.k; ++c) dk_acc[krow + c] += ds[j] * scale * rd(qi[c], bf16);
          for (int64_t c = 0; c < n.kv; ++c) dv_acc[vrow + c] += p[j] * rd(doi[c], bf16);
        }
      }
    }
  }
  for (size_t i = 0; i < dk_acc.size(); ++i) dkey[i] = static_cast<T>(dk_acc[i]);
  for (size_t i = 0; i < dv_acc.size(); ++i) dv[i] = static_cast<T>(dv_acc[i]);
}

template void attention_forward<float>(const AttentionSizes&, double, const AttentionArgs&, const float*,
                                       const float*, const float*, float*, float*);
template void attention_forward<double>(const AttentionSizes&, double, const AttentionArgs&, const double*,
                                        const double*, const double*, double*, double*);
template void attention_backward<float>(const AttentionSizes&, double, const AttentionArgs&, const float*,
                                        const float*, const float*, const float*, const float*, const float*,
                                        const float*, float*, float*, float*);
template void attention_backward<double>(const AttentionSizes&, double, const AttentionArgs&, const double*,
                                         const double*, const double*, const double*, const double*,
                                         const double*, const double*, double*, double*, double*);

}  // namespace ref

static ref::AttentionSizes sizes(const Tensor& q, const Tensor& k, const Tensor& v) {
  return {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), v.size(3)};
}

static void forward_ref(const AttentionArgs& args, const Tensor& q, const Tensor& k,
                        const Tensor& v, Tensor& out, AttentionSaved& saved) {
  ref::attention_forward(sizes(q, k, v), attention_scale(args, q.size(3)), args, q.data<float>(),
                         k.data<float>(), v.data<float>(), out.data<float>(), saved.lse_BHT.data<float>());
}

static void backward_ref(const AttentionArgs& args, const Tensor& dout, const Tensor& dlse,
                         const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                         const AttentionSaved& saved, Tensor& dq, Tensor& dk, Tensor& dv) {
  ref::attention_backward(sizes(q, k, v), attention_scale(args, q.size(3)), args, dout.data<float>(),
                          dlse.defined() ? dlse.data<float>() : nullptr, q.data<float>(), k.data<float>(),
                          v.data<float>(), out.data<float>(), saved.lse_BHT.data<float>(), dq.data<float>(),
                          dk.data<float>(), dv.data<float>());
}

AttentionImpl attention_impl_ref() {
  return {"attention_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
