// Scalar reference for the sigmoid gate: plain loops, math in double.
#include <cmath>

#include "titan/ops/sigmoid_gate/sigmoid_gate.h"
#include "titan/ops/scalar_math.h"

namespace titan::ops {
namespace ref {

template <class T>
void sigmoid_gate_forward(int64_t n, int64_t f, int64_t g, const T* x, const T* gate, T* y) {
  const int64_t group = f / g;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < f; ++i) {
      y[r * f + i] = static_cast<T>(static_cast<double>(x[r * f + i]) * sigmoid(gate[r * g + i / group]));
    }
  }
}

template <class T>
void sigmoid_gate_backward(int64_t n, int64_t f, int64_t g, const T* dy, const T* x, const T* gate, T* dx, T* dgate) {
  const int64_t group = f / g;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < g; ++j) {
      const double s = sigmoid(gate[r * g + j]);
      double acc = 0.0;
      for (int64_t i = j * group; i < (j + 1) * group; ++i) {
        acc += static_cast<double>(dy[r * f + i]) * x[r * f + i];
        dx[r * f + i] = static_cast<T>(dy[r * f + i] * s);
      }
      dgate[r * g + j] = static_cast<T>(acc * s * (1.0 - s));
    }
  }
}

template void sigmoid_gate_forward<float>(int64_t, int64_t, int64_t, const float*, const float*, float*);
template void sigmoid_gate_forward<double>(int64_t, int64_t, int64_t, const double*, const double*, double*);
template void sigmoid_gate_backward<float>(int64_t, int64_t, int64_t, const float*, const float*, const float*,
                                           float*, float*);
template void sigmoid_gate_backward<double>(int64_t, int64_t, int64_t, const double*, const double*, const double*,
                                            double*, double*);

}  // namespace ref

static void forward_ref(const Tensor& x, const Tensor& gate, Tensor& y) {
  ref::sigmoid_gate_forward(x.size(0), x.size(1), gate.size(1), x.data<float>(), gate.data<float>(), y.data<float>());
}

static void backward_ref(const Tensor& dy, const Tensor& x, const Tensor& gate, Tensor& dx, Tensor& dgate) {
  ref::sigmoid_gate_backward(x.size(0), x.size(1), gate.size(1), dy.data<float>(), x.data<float>(),
                             gate.data<float>(), dx.data<float>(), dgate.data<float>());
}

SigmoidGateImpl sigmoid_gate_impl_ref() { return {"sigmoid_gate_ref", Device::cpu, nullptr, forward_ref, backward_ref}; }

}  // namespace titan::ops
