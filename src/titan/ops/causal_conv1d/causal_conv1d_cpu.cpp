// The causal depthwise conv1d on CPU: channels split over threads in blocks of kBlock (each
// thread owns its channels' weight gradient, so the sum order is fixed), tokens in order inside a
// block, the channel loop innermost over contiguous memory.
#include <cmath>
#include <vector>

#include "titan/core/aligned_vector.h"
#include "titan/core/parallel.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/causal_conv1d/causal_conv1d.h"
#include "titan/ops/scalar_math.h"

namespace titan::ops {

namespace {

constexpr int64_t kBlock = 64;  // channels per task

struct Shape3 {
  int64_t batch, tokens, channels, taps;
};

// Row s of [state | x] for channel block [c0, c0 + n): x's row, the state's, or null (zeros).
inline const float* source_row(const Shape3& d, int64_t s, const float* xb, const float* st, int64_t c0) {
  if (s >= 0) return xb + s * d.channels + c0;
  if (st) return st + (s + d.taps - 1) * d.channels + c0;
  return nullptr;
}

TITAN_SIMD_KERNEL(void, forward_block, (const Shape3& d, bool silu, int64_t c0, int64_t n, const float* x,
                                       const float* w, float* y, const float* state),
                  (d, silu, c0, n, x, w, y, state)) {
  AlignedVector<float> acc(n);
  for (int64_t b = 0; b < d.batch; ++b) {
    const float* xb = x + b * d.tokens * d.channels;
    const float* st = state ? state + b * (d.taps - 1) * d.channels : nullptr;
    for (int64_t t = 0; t < d.tokens; ++t) {
      for (int64_t c = 0; c < n; ++c) acc[c] = 0.0f;
      for (int64_t j = 0; j < d.taps; ++j) {
        const float* row = source_row(d, t - (d.taps - 1) + j, xb, st, c0);
        if (!row) continue;
        for (int64_t c = 0; c < n; ++c) acc[c] += w[(c0 + c) * d.taps + j] * row[c];
      }
      float* yt = y + (b * d.tokens + t) * d.channels + c0;
      for (int64_t c = 0; c < n; ++c) yt[c] = silu ? acc[c] * sigmoid(acc[c]) : acc[c];
    }
  }
}

TITAN_SIMD_KERNEL(void, backward_block, (const Shape3& d, bool silu, int64_t c0, int64_t n, const float* dy,
                                        const float* x, const float* w, float* dx, float* dw),
                  (d, silu, c0, n, dy, x, w, dx, dw)) {
  AlignedVector<float> dpre(d.tokens * n), dwb(n * d.taps, 0.0f);
  for (int64_t b = 0; b < d.batch; ++b) {
    const float* xb = x + b * d.tokens * d.channels;
    for (int64_t t = 0; t < d.tokens; ++t) {
      float* dp = dpre.data() + t * n;
      for (int64_t c = 0; c < n; ++c) dp[c] = 0.0f;
      for (int64_t j = 0; j < d.taps; ++j) {
        const float* row = source_row(d, t - (d.taps - 1) + j, xb, nullptr, c0);
        if (!row) continue;
        for (int64_t c = 0; c < n; ++c) dp[c] += w[(c0 + c) * d.taps + j] * row[c];
      }
      const float* g = dy + (b * d.tokens + t) * d.channels + c0;
      for (int64_t c = 0; c < n; ++c) {
        const float p = dp[c], s = sigmoid(p);
        dp[c] = silu ? g[c] * s * (1.0f + p * (1.0f - s)) : g[c];
      }
    }
    // dx_s = sum_j w_j dpre_{s + K - 1 - j};  dw_j += sum_t dpre_t x_{t - (K - 1) + j}.
    for (int64_t s = 0; s < d.tokens; ++s) {
      float* dxs = dx + (b * d.tokens + s) * d.channels + c0;
      for (int64_t c = 0; c < n; ++c) dxs[c] = 0.0f;
      for (int64_t j = 0; j < d.taps; ++j) {
        const int64_t t = s + (d.taps - 1) - j;
        if (t >= d.tokens) continue;
        const float* dp = dpre.data() + t * n;
        for (int64_t c = 0; c < n; ++c) dxs[c] += w[(c0 + c) * d.taps + j] * dp[c];
      }
    }
    for (int64_t t = 0; t < d.tokens; ++t) {
      const float* dp = dpre.data() + t * n;
      for (int64_t j = 0; j < d.taps; ++j) {
        const float* row = source_row(d, t - (d.taps - 1) + j, xb, nullptr, c0);
        if (!row) continue;
        for (int64_t c = 0; c < n; ++c) dwb[c * d.taps + j] += dp[c] * row[c];
      }
    }
  }
  for (int64_t c = 0; c < n; ++c) {
    for (int64_t j = 0; j < d.taps; ++j) dw[(c0 + c) * d.taps + j] += dwb[c * d.taps + j];
  }
}

void forward_cpu(const CausalConv1dArgs& args, const Tensor& x, const Tensor& w, Tensor& y, Tensor& state) {
  const Shape3 d{x.size(0), x.size(1), x.size(2), w.size(1)};
  const float* st = state.defined() ? state.data<float>() : nullptr;
  const int64_t blocks = (d.channels + kBlock - 1) / kBlock;
  parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t c0 = i * kBlock;
      forward_block(d, args.silu, c0, std::min(kBlock, d.channels - c0), x.data<float>(), w.data<float>(),
                    y.data<float>(), st);
    }
  });
  if (!state.defined() || d.taps == 1) return;
  // The last K - 1 rows of [state | x] become the state (rows already in the state move up first).
  const int64_t keep = d.taps - 1;
  float* sp = state.data<float>();
  for (int64_t b = 0; b < d.batch; ++b) {
    float* sb = sp + b * keep * d.channels;
    const float* xb = x.data<float>() + b * d.tokens * d.channels;
    for (int64_t i = 0; i < keep; ++i) {
      const int64_t s = d.tokens - keep + i;
      if (s < 0) {
        std::copy(sb + (s + keep) * d.channels, sb + (s + keep + 1) * d.channels, sb + i * d.channels);
      } else {
        std::copy(xb + s * d.channels, xb + (s + 1) * d.channels, sb + i * d.channels);
      }
    }
  }
}

void backward_cpu(const CausalConv1dArgs& args, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx,
                  Tensor& dw) {
  const Shape3 d{x.size(0), x.size(1), x.size(2), w.size(1)};
  const int64_t blocks = (d.channels + kBlock - 1) / kBlock;
  parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t c0 = i * kBlock;
      backward_block(d, args.silu, c0, std::min(kBlock, d.channels - c0), dy.data<float>(), x.data<float>(),
                     w.data<float>(), dx.data<float>(), dw.data<float>());
    }
  });
}

}  // namespace

CausalConv1dImpl causal_conv1d_impl_cpu() {
  return {"causal_conv1d_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu};
}

}  // namespace titan::ops
