// Scalar reference for RoPE: plain loops, tables in double.
#include <cmath>
#include <vector>

#include "titan/ops/rope/rope.h"

namespace titan::ops {
namespace ref {

template <class T>
void rope_tables(const double* inv_freq, double attention_factor, int64_t n, int64_t k, const int64_t* positions,
                 T* cos, T* sin) {
  const int64_t k2 = k / 2;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < k2; ++i) {
      const double angle = static_cast<double>(positions[t]) * inv_freq[i];
      cos[t * k2 + i] = static_cast<T>(std::cos(angle) * attention_factor);
      sin[t * k2 + i] = static_cast<T>(std::sin(angle) * attention_factor);
    }
  }
}

template <class T>
void rope_tables(double theta, int64_t n, int64_t k, const int64_t* positions, T* cos, T* sin) {
  const int64_t k2 = k / 2;
  std::vector<double> inv_freq(k2);
  for (int64_t i = 0; i < k2; ++i) {
    inv_freq[i] = 1.0 / std::pow(theta, static_cast<double>(2 * i) / static_cast<double>(k));
  }
  rope_tables(inv_freq.data(), 1.0, n, k, positions, cos, sin);
}

// Rotates each (i, i + K/2) pair of a head's first K of `lanes` lanes by its angle: by +angle
// (sign = 1) or -angle (sign = -1); lanes K .. lanes-1 pass through (partial rotary).
template <class T>
static void rotate_pairs(int64_t n, int64_t h, int64_t k, int64_t lanes, const T* cos, const T* sin, double sign,
                         const T* x, T* y) {
  const int64_t k2 = k / 2;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t hd = 0; hd < h; ++hd) {
      const int64_t row = (t * h + hd) * lanes;
      for (int64_t i = k; i < lanes; ++i) y[row + i] = x[row + i];
      for (int64_t i = 0; i < k2; ++i) {
        const double c = cos[t * k2 + i], s = sign * sin[t * k2 + i];
        const double x1 = x[row + i], x2 = x[row + k2 + i];  // both read before y (may alias x)
        y[row + i] = static_cast<T>(x1 * c - x2 * s);
        y[row + k2 + i] = static_cast<T>(x2 * c + x1 * s);
      }
    }
  }
}

template <class T>
void rope_forward(int64_t n, int64_t h, int64_t k, const T* cos, const T* sin, const T* x, T* y, int64_t lanes) {
  rotate_pairs(n, h, k, lanes > 0 ? lanes : k, cos, sin, 1.0, x, y);
}

// dx = R(angle)^T dy = R(-angle) dy.
template <class T>
void rope_backward(int64_t n, int64_t h, int64_t k, const T* cos, const T* sin, const T* dy, T* dx, int64_t lanes) {
  rotate_pairs(n, h, k, lanes > 0 ? lanes : k, cos, sin, -1.0, dy, dx);
}

template void rope_tables<float>(double, int64_t, int64_t, const int64_t*, float*, float*);
template void rope_tables<double>(double, int64_t, int64_t, const int64_t*, double*, double*);
template void rope_tables<float>(const double*, double, int64_t, int64_t, const int64_t*, float*, float*);
template void rope_tables<double>(const double*, double, int64_t, int64_t, const int64_t*, double*, double*);
template void rope_forward<float>(int64_t, int64_t, int64_t, const float*, const float*, const float*, float*, int64_t);
template void rope_forward<double>(int64_t, int64_t, int64_t, const double*, const double*, const double*, double*,
                                   int64_t);
template void rope_backward<float>(int64_t, int64_t, int64_t, const float*, const float*, const float*, float*, int64_t);
template void rope_backward<double>(int64_t, int64_t, int64_t, const double*, const double*, const double*, double*,
                                    int64_t);

}  // namespace ref

// n rows of h heads x k lanes, from x's shape (check_rope has validated it).
// Tokens, heads and lanes per head of x ([..., H, L]).
static void rows_heads_lanes(const Tensor& x, int64_t& n, int64_t& h, int64_t& lanes) {
  lanes = x.size(-1);
  h = x.size(-2);
  n = x.numel() / (h * lanes);
}

static void forward_ref(const RopeTables& tables, const Tensor& x, Tensor& y) {
  int64_t n, h, lanes;
  rows_heads_lanes(x, n, h, lanes);
  ref::rope_forward(n, h, tables.head_dim, tables.cos_NK2.data<float>(), tables.sin_NK2.data<float>(),
                    x.data<float>(), y.data<float>(), lanes);
}

static void backward_ref(const RopeTables& tables, const Tensor& dy, Tensor& dx) {
  int64_t n, h, lanes;
  rows_heads_lanes(dy, n, h, lanes);
  ref::rope_backward(n, h, tables.head_dim, tables.cos_NK2.data<float>(), tables.sin_NK2.data<float>(),
                     dy.data<float>(), dx.data<float>(), lanes);
}

RopeImpl rope_impl_ref() { return {"rope_ref", Device::cpu, nullptr, forward_ref, backward_ref}; }

}  // namespace titan::ops
