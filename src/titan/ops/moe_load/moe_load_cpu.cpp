// moe_load on CPU. Forward: the probability sums split over blocks of experts (each expert's sum
// stays one fp64 chain in token order, the contract's, so the split does not change a bit);
// counts are E integers on the calling thread. Backward: tokens split over threads (each row is
// independent; within it the fp64 dot runs in expert order, as in the reference).
#include <algorithm>

#include "titan/core/parallel.h"
#include "titan/ops/moe_load/moe_load.h"

namespace titan::ops {

// Probabilities per thread chunk at least: below this the fork costs more than the sums.
constexpr int64_t kMoeLoadGrain = 1 << 14;
constexpr int64_t kExpertBlock = 8;  // experts per forward chunk: one cache line of fp64 sums

static void moe_load_forward_cpu(const Tensor& counts_E, const Tensor& probs_NE, Tensor& load_E, Tensor& count_sums_E,
                                 Tensor& prob_sums_E) {
  const int64_t e = counts_E.numel();
  const int64_t* counts = counts_E.data<int64_t>();
  int64_t* load = load_E.data<int64_t>();
  for (int64_t j = 0; j < e; ++j) load[j] += counts[j];
  if (!prob_sums_E.defined()) return;
  double* count_sums = count_sums_E.data<double>();
  for (int64_t j = 0; j < e; ++j) count_sums[j] += static_cast<double>(counts[j]);
  const int64_t n = probs_NE.size(0);
  const float* p = probs_NE.data<float>();
  double* sums = prob_sums_E.data<double>();
  const int64_t blocks = (e + kExpertBlock - 1) / kExpertBlock;
  const int64_t grain = std::max<int64_t>(1, kMoeLoadGrain / std::max<int64_t>(1, n * kExpertBlock));
  parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
    const int64_t j0 = b0 * kExpertBlock, j1 = std::min(e, b1 * kExpertBlock);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t j = j0; j < j1; ++j) sums[j] += p[t * e + j];
    }
  });
}

static void moe_load_backward_cpu(const Tensor& probs_NE, const Tensor& dprob_sums_E, Tensor& dlogits_NE) {
  const int64_t n = probs_NE.size(0), e = probs_NE.size(1);
  const float* p = probs_NE.data<float>();
  const double* q = dprob_sums_E.data<double>();
  float* dz = dlogits_NE.data<float>();
  parallel_for(n, std::max<int64_t>(1, kMoeLoadGrain / std::max<int64_t>(1, e)), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const float* pt = p + t * e;
      double pq = 0.0;
      for (int64_t j = 0; j < e; ++j) pq += pt[j] * q[j];
      for (int64_t j = 0; j < e; ++j) dz[t * e + j] = static_cast<float>(pt[j] * (q[j] - pq));
    }
  });
}

MoeLoadImpl moe_load_impl_cpu() {
  return {"moe_load_cpu", Device::cpu, nullptr, moe_load_forward_cpu, moe_load_backward_cpu};
}

}  // namespace titan::ops
