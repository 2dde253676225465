// MoE combine on CPU: threads over tokens, each token's rows added k ascending in fp32 (the MoE
// block's summation order), so results do not depend on the thread count. Backward: one row copy
// (unweighted) or scaled copy and dot product (weighted) per pair, threads over tokens.
// Shape legend: N tokens, D model width, K top_k, P = N*K dispatch rows.
#include <algorithm>
#include <cstring>

#include "titan/core/parallel.h"
#include "titan/ops/moe_combine/moe_combine.h"

namespace titan::ops {

// Tokens per thread chunk at least.
constexpr int64_t kTokenGrain = 16;

static void forward_cpu(const Tensor& y, const Tensor& weight_t, const Tensor& row_of_pair_t,
                        Tensor& out) {
  const int64_t n = out.size(0), d = out.size(1), kk = row_of_pair_t.size(1);
  if (n == 0) return;
  const float* weight = weight_t.defined() ? weight_t.data<float>() : nullptr;
  const int32_t* row_of_pair = row_of_pair_t.data<int32_t>();
  const float* yp = y.data<float>();
  float* op = out.data<float>();
  parallel_for(n, kTokenGrain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      float* o = op + t * d;
      for (int64_t k = 0; k < kk; ++k) {
        const float w = weight != nullptr ? weight[t * kk + k] : 1.0f;  // 1 * y is exact
        const float* yr = yp + row_of_pair[t * kk + k] * d;
        if (k == 0) {
          for (int64_t i = 0; i < d; ++i) o[i] = w * yr[i];
        } else {
          for (int64_t i = 0; i < d; ++i) o[i] += w * yr[i];
        }
      }
    }
  });
}

static void backward_cpu(const Tensor& dout, const Tensor& y, const Tensor& weight_t,
                         const Tensor& row_of_pair_t, Tensor& dy, Tensor& dweight) {
  const int64_t n = dout.size(0), d = dout.size(1), kk = row_of_pair_t.size(1);
  if (n == 0) return;
  const float* weight = weight_t.defined() ? weight_t.data<float>() : nullptr;
  const int32_t* row_of_pair = row_of_pair_t.data<int32_t>();
  const float* g = dout.data<float>();
  float* dyp = dy.data<float>();
  const float* yp = weight != nullptr ? y.data<float>() : nullptr;
  float* dwp = weight != nullptr ? dweight.data<float>() : nullptr;
  parallel_for(n, kTokenGrain, [&](int64_t begin, int64_t end) {
    for (int64_t q = begin * kk; q < end * kk; ++q) {
      const float* gt = g + (q / kk) * d;
      float* dyr = dyp + row_of_pair[q] * d;
      if (weight == nullptr) {
        std::memcpy(dyr, gt, sizeof(float) * d);
        continue;
      }
      const float w = weight[q];
      const float* yr = yp + row_of_pair[q] * d;
      double acc = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        dyr[i] = w * gt[i];
        acc += static_cast<double>(gt[i]) * yr[i];
      }
      dwp[q] = static_cast<float>(acc);
    }
  });
}

MoeCombineImpl moe_combine_impl_cpu() {
  return {"moe_combine_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu};
}

}  // namespace titan::ops
