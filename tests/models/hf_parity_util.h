// What the model tests against Hugging Face fixtures share: HF's label shift and the two error
// measures their bars are stated in.
#pragma once

#include <algorithm>
#include <cmath>

#include "ops/op_harness.h"
#include "titan/core/tensor.h"

namespace titan::testing {

// Position t predicts labels[t + 1] (HF's shift); the last position has no target (-100).
inline Tensor shifted_targets(const Tensor& labels_BT) {
  const int64_t B = labels_BT.size(0), T = labels_BT.size(1);
  Tensor out = Tensor::empty({B, T}, DType::i64);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < T; ++t) {
      out.data<int64_t>()[b * T + t] = t + 1 < T ? labels_BT.data<int64_t>()[b * T + t + 1] : -100;
    }
  }
  return out;
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = to_doubles(a), y = to_doubles(b);
  double m = 0.0;
  for (size_t i = 0; i < x.size(); ++i) m = std::max(m, std::fabs(x[i] - y[i]));
  return m;
}

// |got - want|_2 / |want|_2.
inline double rel_l2(const Tensor& got, const Tensor& want) {
  const auto x = to_doubles(got), y = to_doubles(want);
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace titan::testing
