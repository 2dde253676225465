// Scalar reference for the MoE experts: per dispatch row, plain loops over its expert's weights,
// math in double. Backward recomputes each row's activations instead of reading saved ones.
#include <cmath>
#include <vector>

#include "titan/ops/moe_experts/moe_experts.h"
#include "titan/ops/scalar_math.h"

namespace titan::ops {
namespace ref {

// One row through one expert: g = w1 x, u = w3 x, h = silu(g) * u (all length f).
template <class T>
static void expert_hidden(int64_t d, int64_t f, const T* x, const T* w1, const T* w3,
                          std::vector<double>& g, std::vector<double>& u, std::vector<double>& h) {
  for (int64_t o = 0; o < f; ++o) {
    double ag = 0.0, au = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      ag += static_cast<double>(w1[o * d + i]) * x[i];
      au += static_cast<double>(w3[o * d + i]) * x[i];
    }
    g[o] = ag;
    u[o] = au;
    h[o] = ag * sigmoid(ag) * au;
  }
}

template <class T>
void moe_experts_forward(int64_t e, int64_t d, int64_t f, const int64_t* offsets, const T* x,
                         const T* w1, const T* w3, const T* w2, T* y, T* gate, T* up) {
  std::vector<double> g(f), u(f), h(f);
  for (int64_t j = 0; j < e; ++j) {
    for (int64_t r = offsets[j]; r < offsets[j + 1]; ++r) {
      expert_hidden(d, f, x + r * d, w1 + j * f * d, w3 + j * f * d, g, u, h);
      for (int64_t o = 0; o < f; ++o) {
        gate[r * f + o] = static_cast<T>(g[o]);
        up[r * f + o] = static_cast<T>(u[o]);
      }
      for (int64_t i = 0; i < d; ++i) {
        double acc = 0.0;
        for (int64_t o = 0; o < f; ++o) acc += static_cast<double>(w2[(j * d + i) * f + o]) * h[o];
        y[r * d + i] = static_cast<T>(acc);
      }
    }
  }
}

// One row (moe_experts.md), s its routing weight (1 when unweighted): dweight = dy . y;
// dh = s w2^T dy; dw2 += s dy h^T; SwiGLU backward; dx, dw1, dw3. The row's dy is read before
// its dx is written, so dx may be dy (in place).
template <class T>
static double row_backward(int64_t d, int64_t f, double s, const T* dy, const T* x, const T* w1e,
                           const T* w3e, const T* w2e, T* dx, T* dw1e, T* dw3e, T* dw2e) {
  std::vector<double> g(f), u(f), h(f), dh(f, 0.0), dxr(d, 0.0);
  expert_hidden(d, f, x, w1e, w3e, g, u, h);
  double dweight = 0.0;
  for (int64_t i = 0; i < d; ++i) {
    double yi = 0.0;
    for (int64_t o = 0; o < f; ++o) {
      yi += static_cast<double>(w2e[i * f + o]) * h[o];
      dh[o] += static_cast<double>(w2e[i * f + o]) * dy[i];
    }
    dweight += yi * dy[i];
    for (int64_t o = 0; o < f; ++o) dw2e[i * f + o] += static_cast<T>(s * dy[i] * h[o]);
  }
  for (int64_t o = 0; o < f; ++o) {
    const double sg = sigmoid(g[o]), dho = s * dh[o];
    const double dg = dho * u[o] * sg * (1.0 + g[o] * (1.0 - sg));
    const double du = dho * g[o] * sg;
    for (int64_t i = 0; i < d; ++i) {
      dxr[i] += dg * w1e[o * d + i] + du * w3e[o * d + i];
      dw1e[o * d + i] += static_cast<T>(dg * x[i]);
      dw3e[o * d + i] += static_cast<T>(du * x[i]);
    }
  }
  for (int64_t i = 0; i < d; ++i) dx[i] = static_cast<T>(dxr[i]);
  return dweight;
}

template <class T>
void moe_experts_backward(int64_t e, int64_t d, int64_t f, const int64_t* offsets, const T* dy,
                          const T* weight, const int32_t* pair_of_row, const T* x, const T* w1,
                          const T* w3, const T* w2, T* dx, T* dw1, T* dw3, T* dw2, T* dweight) {
  for (int64_t j = 0; j < e; ++j) {
    for (int64_t r = offsets[j]; r < offsets[j + 1]; ++r) {
      const double s = weight != nullptr ? static_cast<double>(weight[pair_of_row[r]]) : 1.0;
      const double dw = row_backward(d, f, s, dy + r * d, x + r * d, w1 + j * f * d,
                                     w3 + j * f * d, w2 + j * d * f, dx + r * d, dw1 + j * f * d,
                                     dw3 + j * f * d, dw2 + j * d * f);
      if (weight != nullptr) dweight[pair_of_row[r]] = static_cast<T>(dw);
    }
  }
}

#define TITAN_MOE_EXPERTS_REF_INSTANTIATE(T)                                                       \
  template void moe_experts_forward<T>(int64_t, int64_t, int64_t, const int64_t*, const T*,        \
                                       const T*, const T*, const T*, T*, T*, T*);                  \
  template void moe_experts_backward<T>(int64_t, int64_t, int64_t, const int64_t*, const T*,       \
                                        const T*, const int32_t*, const T*, const T*, const T*,    \
                                        const T*, T*, T*, T*, T*, T*);
TITAN_MOE_EXPERTS_REF_INSTANTIATE(float)
TITAN_MOE_EXPERTS_REF_INSTANTIATE(double)
#undef TITAN_MOE_EXPERTS_REF_INSTANTIATE

}  // namespace ref

static void forward_ref(const Tensor& x, const Tensor& offsets, const Tensor& w1, const Tensor& w3,
                        const Tensor& w2, Tensor& y, MoeExpertsSaved& saved) {
  const int64_t p = x.size(0), d = x.size(1), e = w1.size(0), f = w1.size(1);
  saved.gate_PF = Tensor::empty({p, f});
  saved.up_PF = Tensor::empty({p, f});
  ref::moe_experts_forward(e, d, f, offsets.data<int64_t>(), x.data<float>(), w1.data<float>(),
                           w3.data<float>(), w2.data<float>(), y.data<float>(),
                           saved.gate_PF.data<float>(), saved.up_PF.data<float>());
}

static void backward_ref(const Tensor& dy, const Tensor& weight, const Tensor& pair_of_row,
                         const Tensor& x, const Tensor& offsets, const Tensor& w1, const Tensor& w3,
                         const Tensor& w2, const MoeExpertsSaved&, Tensor& dx, Tensor& dw1,
                         Tensor& dw3, Tensor& dw2, Tensor& dweight) {
  const bool weighted = weight.defined();
  ref::moe_experts_backward(w1.size(0), x.size(1), w1.size(1), offsets.data<int64_t>(),
                            dy.data<float>(), weighted ? weight.data<float>() : nullptr,
                            weighted ? pair_of_row.data<int32_t>() : nullptr, x.data<float>(),
                            w1.data<float>(), w3.data<float>(), w2.data<float>(), dx.data<float>(),
                            dw1.data<float>(), dw3.data<float>(), dw2.data<float>(),
                            weighted ? dweight.data<float>() : nullptr);
}

MoeExpertsImpl moe_experts_impl_ref() {
  return {"moe_experts_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
