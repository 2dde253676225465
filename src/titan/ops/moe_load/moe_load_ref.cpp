// Scalar references of moe_load: moe_load.h's sums in its order, one element at a time.
#include "titan/ops/moe_load/moe_load.h"

namespace titan::ops {
namespace ref {

template <class P>
void moe_load_prob_sums(int64_t n, int64_t e, const P* probs, double* prob_sums) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t j = 0; j < e; ++j) prob_sums[j] += probs[t * e + j];
  }
}

// The softmax backward with upstream q = dprob_sums for every token: dz_j = p_j (q_j - <p, q>).
template <class P, class D>
void moe_load_backward(int64_t n, int64_t e, const P* probs, const double* dprob_sums, D* dlogits) {
  for (int64_t t = 0; t < n; ++t) {
    double pq = 0.0;
    for (int64_t j = 0; j < e; ++j) pq += probs[t * e + j] * dprob_sums[j];
    for (int64_t j = 0; j < e; ++j) dlogits[t * e + j] = static_cast<D>(probs[t * e + j] * (dprob_sums[j] - pq));
  }
}

template void moe_load_prob_sums<float>(int64_t, int64_t, const float*, double*);
template void moe_load_prob_sums<double>(int64_t, int64_t, const double*, double*);
template void moe_load_backward<float, float>(int64_t, int64_t, const float*, const double*, float*);
template void moe_load_backward<double, double>(int64_t, int64_t, const double*, const double*, double*);

}  // namespace ref

static void moe_load_forward_ref(const Tensor& counts_E, const Tensor& probs_NE, Tensor& load_E, Tensor& count_sums_E,
                                 Tensor& prob_sums_E) {
  const int64_t e = counts_E.numel();
  const int64_t* counts = counts_E.data<int64_t>();
  int64_t* load = load_E.data<int64_t>();
  for (int64_t j = 0; j < e; ++j) load[j] += counts[j];
  if (!prob_sums_E.defined()) return;
  double* count_sums = count_sums_E.data<double>();
  for (int64_t j = 0; j < e; ++j) count_sums[j] += static_cast<double>(counts[j]);
  ref::moe_load_prob_sums(probs_NE.size(0), e, probs_NE.data<float>(), prob_sums_E.data<double>());
}

static void moe_load_backward_ref(const Tensor& probs_NE, const Tensor& dprob_sums_E, Tensor& dlogits_NE) {
  ref::moe_load_backward(probs_NE.size(0), probs_NE.size(1), probs_NE.data<float>(), dprob_sums_E.data<double>(),
                         dlogits_NE.data<float>());
}

MoeLoadImpl moe_load_impl_ref() {
  return {"moe_load_ref", Device::cpu, nullptr, moe_load_forward_ref, moe_load_backward_ref};
}

}  // namespace titan::ops
