// Scalar references for the vocabulary-parallel cross-entropy ops: one row at a time, plain loops,
// in the arithmetic vocab_parallel_xent.h fixes (so the float instantiation is the same bits as
// the CPU kernel, which only splits the rows over threads).
#include <cmath>

#include "titan/ops/vocab_parallel_xent/vocab_parallel_xent.h"

namespace titan::ops {
namespace ref {

// The column of row i's target in this rank's slice, or -1 when the target is ignored or held by
// another rank.
static int64_t local_target(const VocabParallelXentArgs& args, int64_t v, int64_t target) {
  if (target == args.ignore_index) return -1;
  const int64_t local = target - args.vocab_start;
  return local >= 0 && local < v ? local : -1;
}

template <class T>
void vocab_parallel_xent_max(int64_t c, int64_t v, const T* logits, double* max) {
  for (int64_t i = 0; i < c; ++i) {
    const T* row = logits + i * v;
    T m = row[0];
    for (int64_t j = 1; j < v; ++j) {
      if (m < row[j]) m = row[j];
    }
    max[i] = static_cast<double>(m);
  }
}

template <class T>
void vocab_parallel_xent_sums(const VocabParallelXentArgs& args, int64_t c, int64_t v, const T* logits,
                              const int64_t* targets, const double* max, double* stats) {
  for (int64_t i = 0; i < c; ++i) {
    const T* row = logits + i * v;
    double sum = 0.0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(row[j]) - max[i]);
    const int64_t local = local_target(args, v, targets[i]);
    stats[2 * i] = sum;
    stats[2 * i + 1] = local >= 0 ? static_cast<double>(row[local]) : 0.0;
  }
}

template <class T>
void vocab_parallel_xent_combine(const VocabParallelXentArgs& args, int64_t c, int64_t v, const int64_t* targets,
                                 const double* max, const double* stats, T* dlogits, T grad_scale,
                                 LmHeadXentResult& result) {
  for (int64_t i = 0; i < c; ++i) {  // loss = log-sum-exp - target logit, row order
    if (targets[i] == args.ignore_index) continue;
    result.loss_sum += std::log(stats[2 * i]) + max[i] - stats[2 * i + 1];
    ++result.num_targets;
  }
  if (dlogits == nullptr) return;
  for (int64_t i = 0; i < c; ++i) {  // dlogits = (softmax - onehot) * grad_scale
    T* row = dlogits + i * v;
    for (int64_t j = 0; j < v; ++j) {
      row[j] = targets[i] == args.ignore_index
                   ? T(0)
                   : static_cast<T>(std::exp(static_cast<double>(row[j]) - max[i]) / stats[2 * i] * grad_scale);
    }
    const int64_t local = local_target(args, v, targets[i]);
    if (local >= 0) row[local] -= grad_scale;
  }
}

template void vocab_parallel_xent_max<float>(int64_t, int64_t, const float*, double*);
template void vocab_parallel_xent_max<double>(int64_t, int64_t, const double*, double*);
template void vocab_parallel_xent_sums<float>(const VocabParallelXentArgs&, int64_t, int64_t, const float*,
                                              const int64_t*, const double*, double*);
template void vocab_parallel_xent_sums<double>(const VocabParallelXentArgs&, int64_t, int64_t, const double*,
                                               const int64_t*, const double*, double*);
template void vocab_parallel_xent_combine<float>(const VocabParallelXentArgs&, int64_t, int64_t, const int64_t*,
                                                 const double*, const double*, float*, float, LmHeadXentResult&);
template void vocab_parallel_xent_combine<double>(const VocabParallelXentArgs&, int64_t, int64_t, const int64_t*,
                                                  const double*, const double*, double*, double,
                                                  LmHeadXentResult&);

}  // namespace ref

static void max_ref(const Tensor& logits, Tensor& max) {
  ref::vocab_parallel_xent_max<float>(logits.size(0), logits.size(1), logits.data<float>(), max.data<double>());
}

static void sums_ref(const VocabParallelXentArgs& args, const Tensor& logits, const Tensor& targets, const Tensor& max,
                     Tensor& stats) {
  ref::vocab_parallel_xent_sums<float>(args, logits.size(0), logits.size(1), logits.data<float>(),
                                       targets.data<int64_t>(), max.data<double>(), stats.data<double>());
}

static void combine_forward_ref(const VocabParallelXentArgs& args, const Tensor& targets, const Tensor& max,
                                const Tensor& stats, LmHeadXentResult& result) {
  ref::vocab_parallel_xent_combine<float>(args, targets.numel(), 0, targets.data<int64_t>(), max.data<double>(),
                                          stats.data<double>(), nullptr, 0.0f, result);
}

static void combine_backward_ref(const VocabParallelXentArgs& args, Tensor& logits, const Tensor& targets,
                                 const Tensor& max, const Tensor& stats, float grad_scale, LmHeadXentResult& result) {
  ref::vocab_parallel_xent_combine<float>(args, logits.size(0), logits.size(1), targets.data<int64_t>(),
                                          max.data<double>(), stats.data<double>(), logits.data<float>(), grad_scale,
                                          result);
}

VocabParallelXentMaxImpl vocab_parallel_xent_max_impl_ref() {
  return {"vocab_parallel_xent_max_ref", Device::cpu, nullptr, max_ref, nullptr};
}
VocabParallelXentSumsImpl vocab_parallel_xent_sums_impl_ref() {
  return {"vocab_parallel_xent_sums_ref", Device::cpu, nullptr, sums_ref, nullptr};
}
VocabParallelXentCombineImpl vocab_parallel_xent_combine_impl_ref() {
  return {"vocab_parallel_xent_combine_ref", Device::cpu, nullptr, combine_forward_ref, combine_backward_ref};
}

}  // namespace titan::ops
