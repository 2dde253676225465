// Scalar reference for causal GQA attention: one query row at a time, accumulation in double,
// O(T) scratch per row (the row's probabilities), never a [T, T] matrix.
#include <cmath>
#include <limits>
#include <vector>

#include "titan/ops/attention/attention.h"

namespace titan::ops {
namespace ref {

// Row offsets into the [b, t, heads, k] layouts.
static int64_t row(int64_t bi, int64_t ti, int64_t hi, int64_t t, int64_t heads, int64_t k) {
  return ((bi * t + ti) * heads + hi) * k;
}

template <class T>
void attention_forward(int64_t b, int64_t t, int64_t h, int64_t g, int64_t k, double scale,
                       const T* q, const T* key, const T* v, T* out, T* lse) {
  const int64_t group = h / g;  // query heads per kv head
  std::vector<double> p(static_cast<size_t>(t));
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
          for (int64_t c = 0; c < k; ++c) s += static_cast<double>(qi[c]) * kj[c];
          p[j] = s * scale;
          m = std::max(m, p[j]);
        }
        // Max-subtracted softmax.
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          p[j] = std::exp(p[j] - m);
          sum += p[j];
        }
        T* oi = out + row(bi, i, hi, t, h, k);
        for (int64_t c = 0; c < k; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j <= i; ++j) acc += p[j] * v[row(bi, j, gi, t, g, k) + c];
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
                        const T* lse, T* dq, T* dkey, T* dv) {
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
        for (int64_t c = 0; c < k; ++c) d_i += static_cast<double>(doi[c]) * oi[c];
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t kvrow = row(bi, j, gi, t, g, k);
          double s = 0.0, dp = 0.0;
          for (int64_t c = 0; c < k; ++c) {
            s += static_cast<double>(qi[c]) * key[kvrow + c];
            dp += static_cast<double>(doi[c]) * v[kvrow + c];
          }
          p[j] = std::exp(s * scale - lse_i);  // P_ij, recomputed from the saved lse
          ds[j] = p[j] * (dp - d_i);           // dS_ij = P_ij (dP_ij - D_i)
        }
        T* dqi = dq + qrow;
        for (int64_t c = 0; c < k; ++c) {
          double acc = 0.0;
          for (int64_t j = 0; j <= i; ++j) acc += ds[j] * key[row(bi, j, gi, t, g, k) + c];
          dqi[c] = static_cast<T>(acc * scale);
        }
        for (int64_t j = 0; j <= i; ++j) {
          const int64_t kvrow = row(bi, j, gi, t, g, k);
          for (int64_t c = 0; c < k; ++c) {
            dk_acc[kvrow + c] += ds[j] * scale * qi[c];
            dv_acc[kvrow + c] += p[j] * doi[c];
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
                                       const float*, const float*, const float*, float*, float*);
template void attention_forward<double>(int64_t, int64_t, int64_t, int64_t, int64_t, double,
                                        const double*, const double*, const double*, double*,
                                        double*);
template void attention_backward<float>(int64_t, int64_t, int64_t, int64_t, int64_t, double,
                                        const float*, const float*, const float*, const float*,
                                        const float*, const float*, float*, float*, float*);
template void attention_backward<double>(int64_t, int64_t, int64_t, int64_t, int64_t, double,
                                         const double*, const double*, const double*,
                                         const double*, const double*, const double*, double*,
                                         double*, double*);

}  // namespace ref

static void forward_ref(const AttentionArgs& args, const Tensor& q, const Tensor& k,
                        const Tensor& v, Tensor& out, AttentionSaved& saved) {
  ref::attention_forward(q.size(0), q.size(1), q.size(2), k.size(2), q.size(3),
                         attention_scale(args, q.size(3)), q.data<float>(), k.data<float>(),
                         v.data<float>(), out.data<float>(), saved.lse_BHT.data<float>());
}

static void backward_ref(const AttentionArgs& args, const Tensor& dout, const Tensor& q,
                         const Tensor& k, const Tensor& v, const Tensor& out,
                         const AttentionSaved& saved, Tensor& dq, Tensor& dk, Tensor& dv) {
  ref::attention_backward(q.size(0), q.size(1), q.size(2), k.size(2), q.size(3),
                          attention_scale(args, q.size(3)), dout.data<float>(), q.data<float>(),
                          k.data<float>(), v.data<float>(), out.data<float>(),
                          saved.lse_BHT.data<float>(), dq.data<float>(), dk.data<float>(),
                          dv.data<float>());
}

AttentionImpl attention_impl_ref() {
  return {"attention_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
