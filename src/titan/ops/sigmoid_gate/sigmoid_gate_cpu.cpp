// The sigmoid gate on CPU: rows split over threads; within a row, one gate's group of features
// at a time (the group's sum for dgate in a fixed order).
#include <cmath>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/simd.h"
#include "titan/ops/sigmoid_gate/sigmoid_gate.h"
#include "titan/ops/scalar_math.h"

namespace titan::ops {

namespace {

TITAN_SIMD_KERNEL(void, forward_rows, (int64_t begin, int64_t end, int64_t f, int64_t g, const float* x,
                                      const float* gate, float* y),
                  (begin, end, f, g, x, gate, y)) {
  const int64_t group = f / g;
  for (int64_t r = begin; r < end; ++r) {
    for (int64_t j = 0; j < g; ++j) {
      const float s = sigmoid(gate[r * g + j]);
      const float* xr = x + r * f + j * group;
      float* yr = y + r * f + j * group;
      for (int64_t i = 0; i < group; ++i) yr[i] = xr[i] * s;
    }
  }
}

TITAN_SIMD_KERNEL(void, backward_rows, (int64_t begin, int64_t end, int64_t f, int64_t g, const float* dy,
                                       const float* x, const float* gate, float* dx, float* dgate),
                  (begin, end, f, g, dy, x, gate, dx, dgate)) {
  const int64_t group = f / g;
  for (int64_t r = begin; r < end; ++r) {
    for (int64_t j = 0; j < g; ++j) {
      const float s = sigmoid(gate[r * g + j]);
      const float* dyr = dy + r * f + j * group;
      const float* xr = x + r * f + j * group;
      float* dxr = dx + r * f + j * group;
      float acc = 0.0f;
      for (int64_t i = 0; i < group; ++i) {
        acc += dyr[i] * xr[i];
        dxr[i] = dyr[i] * s;
      }
      dgate[r * g + j] = acc * s * (1.0f - s);
    }
  }
}

void forward_cpu(const Tensor& x, const Tensor& gate, Tensor& y) {
  const int64_t n = x.size(0), f = x.size(1), g = gate.size(1);
  parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, f)), [&](int64_t b, int64_t e) {
    forward_rows(b, e, f, g, x.data<float>(), gate.data<float>(), y.data<float>());
  });
}

void backward_cpu(const Tensor& dy, const Tensor& x, const Tensor& gate, Tensor& dx, Tensor& dgate) {
  const int64_t n = x.size(0), f = x.size(1), g = gate.size(1);
  parallel_for(n, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, f)), [&](int64_t b, int64_t e) {
    backward_rows(b, e, f, g, dy.data<float>(), x.data<float>(), gate.data<float>(), dx.data<float>(),
                  dgate.data<float>());
  });
}

}  // namespace

SigmoidGateImpl sigmoid_gate_impl_cpu() {
  return {"sigmoid_gate_cpu", Device::cpu, nullptr, forward_cpu, backward_cpu};
}

}  // namespace titan::ops
