// Scalar reference: two-pass softmax per query row, double accumulation, no threads.
#include <cmath>
#include <vector>

#include "titan/ops/kv_attention/kv_attention.h"

namespace titan::ops {

static void forward_ref(const KvAttentionArgs& args, const Tensor& q_BSHK, const Tensor& k_BCGK,
                        const Tensor& v_BCGK, const Tensor& begin_B, int64_t end, Tensor& out_BSHK) {
  const int64_t B = q_BSHK.size(0), S = q_BSHK.size(1), H = q_BSHK.size(2), K = q_BSHK.size(3);
  const int64_t C = k_BCGK.size(1), G = k_BCGK.size(2);
  const double scale = args.scale != 0.0f ? args.scale : 1.0 / std::sqrt(static_cast<double>(K));
  const float* q = q_BSHK.data<float>();
  const float* key = k_BCGK.data<float>();
  const float* val = v_BCGK.data<float>();
  float* out = out_BSHK.data<float>();
  std::vector<double> score(static_cast<size_t>(C)), acc(static_cast<size_t>(K));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t begin = begin_B.data<int64_t>()[b];
    for (int64_t s = 0; s < S; ++s) {
      const int64_t p = end - S + s;  // this query's slot
      for (int64_t h = 0; h < H; ++h) {
        const int64_t g = h / (H / G);
        const float* qi = q + ((b * S + s) * H + h) * K;
        float* o = out + ((b * S + s) * H + h) * K;
        double max = -INFINITY;
        for (int64_t j = begin; j <= p; ++j) {
          const float* kj = key + ((b * C + j) * G + g) * K;
          double dot = 0.0;
          for (int64_t d = 0; d < K; ++d) dot += static_cast<double>(qi[d]) * kj[d];
          score[j] = dot * scale;
          max = std::max(max, score[j]);
        }
        double sum = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = begin; j <= p; ++j) {
          const double e = std::exp(score[j] - max);
          sum += e;
          const float* vj = val + ((b * C + j) * G + g) * K;
          for (int64_t d = 0; d < K; ++d) acc[d] += e * vj[d];
        }
        for (int64_t d = 0; d < K; ++d) o[d] = sum > 0.0 ? static_cast<float>(acc[d] / sum) : 0.0f;
      }
    }
  }
}

KvAttentionImpl kv_attention_impl_ref() { return {"kv_attention_ref", Device::cpu, nullptr, forward_ref, nullptr}; }

}  // namespace titan::ops
