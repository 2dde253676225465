// Scalar reference for causal GQA attention: one query row at a time, accumulation in double,
// O(T) scratch per row (the row's probabilities), never a [T, T] matrix.
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

// Row offsets into the [b, t, heads, k] layouts.
static int64_t row(int64_t bi, int64_t ti, int64_t hi, int64_t t, int64_t heads, int64_t k) {
  return ((bi * t + ti) * heads + hi) * k;
}

template <class T>
void attention_forward(int64_t b, int64_t t, int64_t h, int64_t g, int64_t k, double scale,
                       const T* q, const T* key, const T* v, T* out, T* lse, bool bf16) {
  const int64_t group = h / g;  // query heads per kv head
  const double ln2 = std::log(2.0);
  std::vector<double> p(static_cast<size_t>(t)), p_op(static_cast<size_t>(t));
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t hi = 0; hi < h; ++hi) {
      const int64_t gi = hi / group;
      for (int64_t i = 0; i < t; ++i) {
        const T* qi = q + row(bi, i, hi, t, h, k);
        // Scores s_j = scale * q_i . k_j over the visible keys j <= i.
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          const T* kj = key + row(bi, j, gi, t, g, k);
          double s = 0.0;
          for (int64_t c = 0; c < k; ++c) s += rd(qi[c], bf16) * rd(kj[c], bf16);
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        // Max-subtracted softmax. In bf16 the offset is the max rounded up to a multiple of ln 2
        // (so that rounding exp(S - m) is the rounding of exp(S) itself), and the normaliser is
        // the sum of the unrounded terms.
        if (bf16) m = ln2 * std::ceil(m / ln2);
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          p[j] = std::exp(p[j] - m);
          sum += p[j];
          p_op[j] = rd(p[j], bf16);
        }
        T* oi = out + row(bi, i, hi, t, h, k);
        for (int64_t c = 0; c < k; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j <= i; ++j) acc += p_op[j] * rd(v[row(bi, j, gi, t, g, k) + c], bf16);
          oi[c] = static_cast<T>(acc / sum);
        }
        lse[(bi * h + hi) * t + i] = static_cast<T>(m + std::log(sum));
      }
    }
  }
}

template <class T>
void attention_backward(int64_t b, int64_t t, int64_t h, int64_t g, int64_t k, double scale,
                        const T* dout, const T* q, const T* key, const T* v, const T* out,
                        const T* lse, T* dq, T* dkey, T* dv, bool bf16) {
  const int64_t group = h / g;
  // dk and dv collect contributions from every query row; accumulate them in double.
  std::vector<double> dk_acc(static_cast<size_t>(b * t * g * k), 0.0);
  std::vector<double> dv_acc(dk_acc.size(), 0.0);
  std::vector<double> p(static_cast<size_t>(t)), ds(static_cast<size_t>(t));
  for (int64_t bi = 0; bi < b; ++bi) {
    for (int64_t hi = 0; hi < h; ++hi) {
      const int64_t gi = hi / group;
      for (int64_t i = 0; i < t; ++i) {
        const int64_t qrow = row(bi, i, hi, t, h, k);
        const T* qi = q + qrow;
        const T* doi = dout + qrow;
        const T* oi = out + qrow;
        const double lse_i = lse[(bi * h + hi) * t + i];
        // D_i = dout_i . out_i  (= sum_j P_ij dP_ij).
        double d_i = 0.0;
        for (int64_t c = 0; c < k; ++c) d_i += rd(doi[c], bf16) * oi[c];
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t kvrow = row(bi, j, gi, t, g, k);
          double s = 0.0, dp = 0.0;
          for (int64_t c = 0; c < k; ++c) {
            s += rd(qi[c], bf16) * rd(key[kvrow + c], bf16);
            dp += rd(doi[c], bf16) * rd(v[kvrow + c], bf16);
          }
          // P_ij, recomputed from the saved lse, and dS_ij = P_ij (dP_ij - D_i); as operands of
          // the products below both are rounded in bf16.
          const double pj = std::exp(s * scale - lse_i);
          p[j] = rd(pj, bf16);
          ds[j] = rd(pj * (dp - d_i), bf16);
        }
        T* dqi = dq + qrow;
        for (int64_t c = 0; c < k; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j <= i; ++j) acc += ds[j] * rd(key[row(bi, j, gi, t, g, k) + c], bf16);
          dqi[c] = static_cast<T>(acc * scale);
        }
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t kvrow = row(bi, j, gi, t, g, k);
          for (int64_t c = 0; c < k; ++c) {
            dk_acc[kvrow + c] += ds[j] * scale * rd(qi[c], bf16);
            dv_acc[kvrow + c] += p[j] * rd(doi[c], bf16);
          }
        }
      }
    }
  }
  for (size_t n = 0; n < dk_acc.size(); ++n) {
    dkey[n] = static_cast<T>(dk_acc[n]);
    dv[n] = static_cast<T>(dv_acc[n]);
  }
}

template void attention_forward<float>(int64_t, int64_t, int64_t, int64_t, int64_t, double,
                                       const float*, const float*, const float*, float*, float*, bool);
template void attention_forward<double>(int64_t, int64_t, int64_t, int64_t, int64_t, double,
                                        const double*, const double*, const double*, double*,
                                        double*, bool);
template void attention_backward<float>(int64_t, int64_t, int64_t, int64_t, int64_t, double,
                                        const float*, const float*, const float*, const float*,
                                        const float*, const float*, float*, float*, float*, bool);
template void attention_backward<double>(int64_t, int64_t, int64_t, int64_t, int64_t, double,
                                         const double*, const double*, const double*,
                                         const double*, const double*, const double*, double*,
                                         double*, double*, bool);

}  // namespace ref

static void forward_ref(const AttentionArgs& args, const Tensor& q, const Tensor& k,
                        const Tensor& v, Tensor& out, AttentionSaved& saved) {
  ref::attention_forward(q.size(0), q.size(1), q.size(2), k.size(2), q.size(3),
                         attention_scale(args, q.size(3)), q.data<float>(), k.data<float>(),
                         v.data<float>(), out.data<float>(), saved.lse_BHT.data<float>(),
                         args.compute == DType::bf16);
}

static void backward_ref(const AttentionArgs& args, const Tensor& dout, const Tensor& q,
                         const Tensor& k, const Tensor& v, const Tensor& out,
                         const AttentionSaved& saved, Tensor& dq, Tensor& dk, Tensor& dv) {
  ref::attention_backward(q.size(0), q.size(1), q.size(2), k.size(2), q.size(3),
                          attention_scale(args, q.size(3)), dout.data<float>(), q.data<float>(),
                          k.data<float>(), v.data<float>(), out.data<float>(),
                          saved.lse_BHT.data<float>(), dq.data<float>(), dk.data<float>(),
                          dv.data<float>(), args.compute == DType::bf16);
}

AttentionImpl attention_impl_ref() {
  return {"attention_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
