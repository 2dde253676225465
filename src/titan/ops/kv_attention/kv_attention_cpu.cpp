// CPU kernel: one task per (row, new token, kv head); the H / G query heads that share a kv head
// run together so each cached key and value row is read once per group (decode is bandwidth-bound
// on the cache). Scores live in a per-task buffer of end floats; two passes (scores + max, then
// exp-weighted sum of v). Dot products keep 16 independent f32 lanes so the compiler vectorizes
// them without reassociating (no -ffast-math).
#include <cmath>
#include <vector>

#include "titan/core/parallel.h"
#include "titan/ops/kv_attention/kv_attention.h"

namespace titan::ops {

static inline float dot16(const float* a, const float* b, int64_t n) {
  float lane[16] = {};
  int64_t d = 0;
  for (; d + 16 <= n; d += 16) {
    for (int l = 0; l < 16; ++l) lane[l] += a[d + l] * b[d + l];
  }
  float sum = 0.0f;
  for (; d < n; ++d) sum += a[d] * b[d];
  for (int l = 0; l < 16; ++l) sum += lane[l];
  return sum;
}

static void forward_cpu(const KvAttentionArgs& args, const Tensor& q_BSHK, const Tensor& k_BCGK,
                        const Tensor& v_BCGK, const Tensor& begin_B, int64_t end, Tensor& out_BSHK) {
  const int64_t B = q_BSHK.size(0), S = q_BSHK.size(1), H = q_BSHK.size(2), K = q_BSHK.size(3);
  const int64_t C = k_BCGK.size(1), G = k_BCGK.size(2), R = H / G;
  const float scale = args.scale != 0.0f ? args.scale : 1.0f / std::sqrt(static_cast<float>(K));
  const float* q = q_BSHK.data<float>();
  const float* key = k_BCGK.data<float>();
  const float* val = v_BCGK.data<float>();
  const int64_t* begin_of = begin_B.data<int64_t>();
  float* out = out_BSHK.data<float>();
  parallel_for(B * S * G, 1, [&](int64_t first, int64_t last) {
    std::vector<float> score(static_cast<size_t>(R * end));  // [R, end]
    std::vector<float> max(static_cast<size_t>(R)), sum(static_cast<size_t>(R));
    for (int64_t task = first; task < last; ++task) {
      const int64_t g = task % G, s = (task / G) % S, b = task / (G * S);
      const int64_t begin = begin_of[b], p = end - S + s;
      float* o0 = out + ((b * S + s) * H + g * R) * K;
      if (p < begin) {  // a padding position: nothing to attend
        std::fill(o0, o0 + R * K, 0.0f);
        continue;
      }
      std::fill(max.begin(), max.end(), -INFINITY);
      for (int64_t j = begin; j <= p; ++j) {
        const float* kj = key + ((b * C + j) * G + g) * K;
        for (int64_t r = 0; r < R; ++r) {
          const float x = scale * dot16(q + ((b * S + s) * H + g * R + r) * K, kj, K);
          score[r * end + j] = x;
          max[r] = std::max(max[r], x);
        }
      }
      std::fill(sum.begin(), sum.end(), 0.0f);
      std::fill(o0, o0 + R * K, 0.0f);
      for (int64_t j = begin; j <= p; ++j) {
        const float* vj = val + ((b * C + j) * G + g) * K;
        for (int64_t r = 0; r < R; ++r) {
          const float e = std::exp(score[r * end + j] - max[r]);
          sum[r] += e;
          float* o = o0 + r * K;
          for (int64_t d = 0; d < K; ++d) o[d] += e * vj[d];
        }
      }
      for (int64_t r = 0; r < R; ++r) {
        const float inv = 1.0f / sum[r];
        float* o = o0 + r * K;
        for (int64_t d = 0; d < K; ++d) o[d] *= inv;
      }
    }
  });
}

KvAttentionImpl kv_attention_impl_cpu() { return {"kv_attention_cpu", Device::cpu, nullptr, forward_cpu, nullptr}; }

}  // namespace titan::ops
