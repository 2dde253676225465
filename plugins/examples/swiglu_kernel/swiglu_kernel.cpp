// swiglu_kernel: a kernel for an op, not a module. It adds an implementation of the swiglu op
// (h = silu(gate) * up; ops/swiglu/swiglu.h) to the op's table; every module that runs the op
// (the dense feed-forward) then dispatches to it, with no override and no change to the model's
// config tree. Its `supports` takes widths that are a multiple of 8 only (its loop is unrolled by
// 8): on other shapes dispatch falls back to titan's own kernel, which the startup log says.
// Backward: dgate = dh * up * s * (1 + g (1 - s)), dup = dh * silu(g), s = sigmoid(g).
#include <cmath>

#include "titan/core/parallel.h"
#include "titan/plugins/plugin_api.h"

namespace {

using titan::Tensor;

bool supports(const Tensor& gate, const Tensor& up) {
  return gate.dtype() == titan::DType::f32 && gate.numel() % 8 == 0 && gate.shape() == up.shape() &&
         gate.is_contiguous() && up.is_contiguous();
}

void forward(const Tensor& gate, const Tensor& up, Tensor& h) {
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* out = h.data<float>();
  titan::parallel_for(gate.numel() / 8, 512, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      for (int64_t i = b * 8; i < b * 8 + 8; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
    }
  });
}

void backward(const Tensor& dh, const Tensor& gate, const Tensor& up, Tensor& dgate, Tensor& dup) {
  const float* d = dh.data<float>();
  const float* g = gate.data<float>();
  const float* u = up.data<float>();
  float* dg = dgate.data<float>();
  float* du = dup.data<float>();
  titan::parallel_for(gate.numel() / 8, 512, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      for (int64_t i = b * 8; i < b * 8 + 8; ++i) {
        const float s = 1.0f / (1.0f + std::exp(-g[i]));
        dg[i] = d[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
        du[i] = d[i] * g[i] * s;
      }
    }
  });
}

}  // namespace

extern "C" int titan_plugin_api_version() { return TITAN_PLUGIN_API_VERSION; }

extern "C" void titan_plugin_register(titan::plugins::PluginRegistrar& registrar) {
  registrar.add_kernel("swiglu", titan::ops::SwigluImpl{"swiglu_plugin_x8", titan::Device::cpu, &supports, &forward,
                                                        &backward});
}
