// Scalar reference for the causal depthwise conv1d: plain loops, math in double.
#include <cmath>
#include <vector>

#include "titan/ops/causal_conv1d/causal_conv1d.h"
#include "titan/ops/scalar_math.h"

namespace titan::ops {
namespace ref {

namespace {

// pre_t[c] over [state (K - 1 rows, or zeros) | x], rows of C.
template <class T>
double pre(int64_t t, int64_t c, int64_t tokens, int64_t channels, int64_t taps, const T* x, const T* weight,
           const T* state) {
  double acc = 0.0;
  for (int64_t j = 0; j < taps; ++j) {
    const int64_t s = t - (taps - 1) + j;
    const double xs = s >= 0 ? static_cast<double>(x[s * channels + c])
                      : state ? static_cast<double>(state[(s + taps - 1) * channels + c])
                              : 0.0;
    acc += static_cast<double>(weight[c * taps + j]) * xs;
  }
  (void)tokens;
  return acc;
}

}  // namespace

template <class T>
void causal_conv1d_forward(bool silu, int64_t batch, int64_t tokens, int64_t channels, int64_t taps, const T* x,
                           const T* weight, T* y, T* state) {
  const int64_t keep = taps - 1;
  for (int64_t b = 0; b < batch; ++b) {
    const T* xb = x + b * tokens * channels;
    T* st = state ? state + b * keep * channels : nullptr;
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t c = 0; c < channels; ++c) {
        const double p = pre(t, c, tokens, channels, taps, xb, weight, st);
        y[(b * tokens + t) * channels + c] = static_cast<T>(silu ? p * sigmoid(p) : p);
      }
    }
    if (st) {  // the last K - 1 rows of [state | x]
      std::vector<T> rows(keep * channels);
      for (int64_t i = 0; i < keep; ++i) {
        const int64_t s = tokens - keep + i;
        for (int64_t c = 0; c < channels; ++c) {
          rows[i * channels + c] = s >= 0 ? xb[s * channels + c] : st[(s + keep) * channels + c];
        }
      }
      std::copy(rows.begin(), rows.end(), st);
    }
  }
}

template <class T>
void causal_conv1d_backward(bool silu, int64_t batch, int64_t tokens, int64_t channels, int64_t taps, const T* dy,
                            const T* x, const T* weight, T* dx, T* dweight) {
  std::vector<double> dpre(tokens * channels), dw(channels * taps, 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    const T* xb = x + b * tokens * channels;
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t c = 0; c < channels; ++c) {
        const double p = pre<T>(t, c, tokens, channels, taps, xb, weight, nullptr), s = sigmoid(p);
        const double g = static_cast<double>(dy[(b * tokens + t) * channels + c]);
        dpre[t * channels + c] = silu ? g * s * (1.0 + p * (1.0 - s)) : g;
      }
    }
    for (int64_t s = 0; s < tokens; ++s) {
      for (int64_t c = 0; c < channels; ++c) {
        double acc = 0.0;
        for (int64_t j = 0; j < taps; ++j) {
          const int64_t t = s + (taps - 1) - j;
          if (t < tokens) acc += static_cast<double>(weight[c * taps + j]) * dpre[t * channels + c];
        }
        dx[(b * tokens + s) * channels + c] = static_cast<T>(acc);
      }
    }
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t c = 0; c < channels; ++c) {
        for (int64_t j = 0; j < taps; ++j) {
          const int64_t s = t - (taps - 1) + j;
          if (s >= 0) dw[c * taps + j] += dpre[t * channels + c] * static_cast<double>(xb[s * channels + c]);
        }
      }
    }
  }
  for (int64_t i = 0; i < channels * taps; ++i) dweight[i] = static_cast<T>(dweight[i] + dw[i]);
}

template void causal_conv1d_forward<float>(bool, int64_t, int64_t, int64_t, int64_t, const float*, const float*,
                                           float*, float*);
template void causal_conv1d_forward<double>(bool, int64_t, int64_t, int64_t, int64_t, const double*, const double*,
                                            double*, double*);
template void causal_conv1d_backward<float>(bool, int64_t, int64_t, int64_t, int64_t, const float*, const float*,
                                            const float*, float*, float*);
template void causal_conv1d_backward<double>(bool, int64_t, int64_t, int64_t, int64_t, const double*,
                                             const double*, const double*, double*, double*);

}  // namespace ref

static void forward_ref(const CausalConv1dArgs& args, const Tensor& x, const Tensor& w, Tensor& y, Tensor& state) {
  ref::causal_conv1d_forward(args.silu, x.size(0), x.size(1), x.size(2), w.size(1), x.data<float>(), w.data<float>(),
                             y.data<float>(), state.defined() ? state.data<float>() : nullptr);
}

static void backward_ref(const CausalConv1dArgs& args, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx,
                         Tensor& dw) {
  ref::causal_conv1d_backward(args.silu, x.size(0), x.size(1), x.size(2), w.size(1), dy.data<float>(),
                              x.data<float>(), w.data<float>(), dx.data<float>(), dw.data<float>());
}

CausalConv1dImpl causal_conv1d_impl_ref() {
  return {"causal_conv1d_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
