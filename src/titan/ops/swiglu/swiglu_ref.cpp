// Scalar reference for SwiGLU: plain loops, math in double.
#include <cmath>

#include "titan/ops/swiglu/swiglu.h"
#include "titan/ops/scalar_math.h"

namespace titan::ops {
namespace ref {

template <class T>
void swiglu_forward(int64_t n, const T* gate, const T* up, T* h) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i];
    h[i] = static_cast<T>(g * sigmoid(g) * up[i]);
  }
}

template <class T>
void swiglu_backward(int64_t n, const T* dh, const T* gate, const T* up, T* dgate, T* dup) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = gate[i], s = sigmoid(g), d = dh[i];
    // d silu / dg = s * (1 + g * (1 - s)); see swiglu.md.
    const double dg = d * up[i] * s * (1.0 + g * (1.0 - s));
    const double du = d * g * s;
    dgate[i] = static_cast<T>(dg);
    dup[i] = static_cast<T>(du);
  }
}

template void swiglu_forward<float>(int64_t, const float*, const float*, float*);
template void swiglu_forward<double>(int64_t, const double*, const double*, double*);
template void swiglu_backward<float>(int64_t, const float*, const float*, const float*, float*, float*);
template void swiglu_backward<double>(int64_t, const double*, const double*, const double*, double*, double*);

}  // namespace ref

static void forward_ref(const Tensor& gate, const Tensor& up, Tensor& h) {
  ref::swiglu_forward(gate.numel(), gate.data<float>(), up.data<float>(), h.data<float>());
}

static void backward_ref(const Tensor& dh, const Tensor& gate, const Tensor& up, Tensor& dgate,
                         Tensor& dup) {
  ref::swiglu_backward(gate.numel(), dh.data<float>(), gate.data<float>(), up.data<float>(),
                       dgate.data<float>(), dup.data<float>());
}

SwigluImpl swiglu_impl_ref() { return {"swiglu_ref", Device::cpu, nullptr, forward_ref, backward_ref}; }

}  // namespace titan::ops
