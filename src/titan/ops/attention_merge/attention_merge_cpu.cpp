// The attention merge on CPU: output rows split over threads; per row the parts' weights
// w_r = exp(lse_r - lse) once, then vector loops over Kv (the compiler vectorises the plain
// loops; the op is memory-bound, R + 1 reads and a write per element).
#include <cmath>
#include <limits>

#include "titan/core/parallel.h"
#include "titan/ops/attention_merge/attention_merge.h"

namespace titan::ops {
namespace {

struct Rows {
  int64_t t, h, kv, parts;
  int64_t lse_index(int64_t row) const {
    const int64_t hh = row % h, bt = row / h;
    return (bt / t * h + hh) * t + bt % t;
  }
};

Rows rows_of(std::span<const Tensor> outs) {
  return {outs[0].size(1), outs[0].size(2), outs[0].size(3), static_cast<int64_t>(outs.size())};
}

// The parts' weights for lse index li, and the merged lse (-inf: every weight 0).
float weights(const Rows& n, std::span<const Tensor> lses, int64_t li, float* w) {
  constexpr float neg_inf = -std::numeric_limits<float>::infinity();
  float m = neg_inf;
  for (int64_t r = 0; r < n.parts; ++r) m = std::max(m, lses[r].data<float>()[li]);
  if (m == neg_inf) {
    for (int64_t r = 0; r < n.parts; ++r) w[r] = 0.0f;
    return neg_inf;
  }
  float sum = 0.0f;
  for (int64_t r = 0; r < n.parts; ++r) sum += std::exp(lses[r].data<float>()[li] - m);
  const float l = m + std::log(sum);
  for (int64_t r = 0; r < n.parts; ++r) w[r] = std::exp(lses[r].data<float>()[li] - l);
  return l;
}

void forward_cpu(std::span<const Tensor> outs, std::span<const Tensor> lses, Tensor& out, Tensor& lse) {
  const Rows n = rows_of(outs);
  float* o = out.data<float>();
  float* l = lse.data<float>();
  parallel_for(out.numel() / n.kv, 16, [&](int64_t begin, int64_t end) {
    float w[kMaxMergeParts];
    for (int64_t row = begin; row < end; ++row) {
      const int64_t li = n.lse_index(row);
      l[li] = weights(n, lses, li, w);
      float* orow = o + row * n.kv;
      const float* first = outs[0].data<float>() + row * n.kv;
      for (int64_t c = 0; c < n.kv; ++c) orow[c] = w[0] * first[c];
      for (int64_t r = 1; r < n.parts; ++r) {
        const float* part = outs[r].data<float>() + row * n.kv;
        const float wr = w[r];
        for (int64_t c = 0; c < n.kv; ++c) orow[c] += wr * part[c];
      }
    }
  });
}

void backward_cpu(const Tensor& dout, const Tensor& dlse, const Tensor& out, const Tensor& lse,
                  std::span<const Tensor> outs, std::span<const Tensor> lses, std::span<Tensor> douts,
                  std::span<Tensor> dlses) {
  const Rows n = rows_of(outs);
  const float* dl = dlse.defined() ? dlse.data<float>() : nullptr;
  parallel_for(out.numel() / n.kv, 16, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t li = n.lse_index(row);
      const float l = lse.data<float>()[li];
      const float* d = dout.data<float>() + row * n.kv;
      const float* o = out.data<float>() + row * n.kv;
      // dout . out once; dout . (out_r - out) = dout . out_r - dout . out.
      float d_o = 0.0f;
      for (int64_t c = 0; c < n.kv; ++c) d_o += d[c] * o[c];
      for (int64_t r = 0; r < n.parts; ++r) {
        const float w = std::isfinite(l) ? std::exp(lses[r].data<float>()[li] - l) : 0.0f;
        const float* part = outs[r].data<float>() + row * n.kv;
        float* dpart = douts[r].data<float>() + row * n.kv;
        float d_p = 0.0f;
        for (int64_t c = 0; c < n.kv; ++c) {
          d_p += d[c] * part[c];
          dpart[c] = w * d[c];
        }
        dlses[r].data<float>()[li] = w * (d_p - d_o + (dl != nullptr ? dl[li] : 0.0f));
      }
    }
  });
}

}  // namespace

AttentionMergeImpl attention_merge_impl_cpu() {
  return {"attention_merge_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu};
}

}  // namespace titan::ops
