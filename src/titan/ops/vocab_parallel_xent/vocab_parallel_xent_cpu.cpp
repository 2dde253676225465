// The vocabulary-parallel cross-entropy ops on CPU: rows split over threads (16 rows at least per
// thread; each row's loop is whole on one thread, in the contract's order, so the split does not
// change a bit). The loss sum runs on the calling thread in row order (it is the caller's running
// sum). The per-row exp stays scalar f64: the contract fixes its order and precision, which the
// tensor-parallel loss must reproduce at every degree.
#include <algorithm>
#include <cmath>

#include "titan/core/parallel.h"
#include "titan/ops/vocab_parallel_xent/vocab_parallel_xent.h"

namespace titan::ops {

constexpr int64_t kRowGrain = 16;

static void max_cpu(const Tensor& logits, Tensor& max) {
  const int64_t c = logits.size(0), v = logits.size(1);
  const float* z = logits.data<float>();
  double* m = max.data<double>();
  parallel_for(c, kRowGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) m[i] = *std::max_element(z + i * v, z + (i + 1) * v);
  });
}

static void sums_cpu(const VocabParallelXentArgs& args, const Tensor& logits, const Tensor& targets, const Tensor& max,
                     Tensor& stats) {
  const int64_t c = logits.size(0), v = logits.size(1);
  const float* z = logits.data<float>();
  const int64_t* t = targets.data<int64_t>();
  const double* m = max.data<double>();
  double* s = stats.data<double>();
  parallel_for(c, kRowGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const float* row = z + i * v;
      double sum = 0.0;
      for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(row[j]) - m[i]);
      s[2 * i] = sum;
      const int64_t local = t[i] - args.vocab_start;
      s[2 * i + 1] = t[i] != args.ignore_index && local >= 0 && local < v ? row[local] : 0.0;
    }
  });
}

static void combine_forward_cpu(const VocabParallelXentArgs& args, const Tensor& targets, const Tensor& max,
                                const Tensor& stats, LmHeadXentResult& result) {
  const int64_t* t = targets.data<int64_t>();
  const double* m = max.data<double>();
  const double* s = stats.data<double>();
  for (int64_t i = 0; i < targets.numel(); ++i) {
    if (t[i] == args.ignore_index) continue;
    result.loss_sum += std::log(s[2 * i]) + m[i] - s[2 * i + 1];
    ++result.num_targets;
  }
}

static void combine_backward_cpu(const VocabParallelXentArgs& args, Tensor& logits, const Tensor& targets,
                                 const Tensor& max, const Tensor& stats, float grad_scale, LmHeadXentResult& result) {
  combine_forward_cpu(args, targets, max, stats, result);
  const int64_t c = logits.size(0), v = logits.size(1);
  float* z = logits.data<float>();
  const int64_t* t = targets.data<int64_t>();
  const double* m = max.data<double>();
  const double* s = stats.data<double>();
  parallel_for(c, kRowGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float* row = z + i * v;
      if (t[i] == args.ignore_index) {
        std::fill(row, row + v, 0.0f);
        continue;
      }
      for (int64_t j = 0; j < v; ++j) {
        row[j] = static_cast<float>(std::exp(static_cast<double>(row[j]) - m[i]) / s[2 * i] * grad_scale);
      }
      const int64_t local = t[i] - args.vocab_start;
      if (local >= 0 && local < v) row[local] -= grad_scale;
    }
  });
}

VocabParallelXentMaxImpl vocab_parallel_xent_max_impl_cpu() {
  return {"vocab_parallel_xent_max_cpu", Device::cpu, nullptr, max_cpu, nullptr};
}
VocabParallelXentSumsImpl vocab_parallel_xent_sums_impl_cpu() {
  return {"vocab_parallel_xent_sums_cpu", Device::cpu, nullptr, sums_cpu, nullptr};
}
VocabParallelXentCombineImpl vocab_parallel_xent_combine_impl_cpu() {
  return {"vocab_parallel_xent_combine_cpu", Device::cpu, nullptr, combine_forward_cpu, combine_backward_cpu};
}

}  // namespace titan::ops
