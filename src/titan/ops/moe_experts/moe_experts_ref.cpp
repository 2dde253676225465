// Scalar reference for the MoE experts: per dispatch row, plain loops over its expert's weights,
// math in double. Backward recomputes each row's activations instead of reading saved ones.
#include <cmath>
#include <vector>

#include "titan/core/dtype.h"
#include "titan/ops/moe_experts/moe_experts.h"
#include "titan/ops/scalar_math.h"

namespace titan::ops {
namespace ref {

// v rounded to bf16 (through f32, as the kernel's f32 value is rounded) when `on`.
static double rounded(double v, bool on) { return on ? bf16_to_f32(f32_to_bf16(static_cast<float>(v))) : v; }

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
                         const T* w1, const T* w3, const T* w2, T* y, T* gate, T* up, bool round_bf16) {
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
        for (int64_t o = 0; o < f; ++o) acc += static_cast<double>(w2[(j * d + i) * f + o]) * rounded(h[o], round_bf16);
        y[r * d + i] = static_cast<T>(acc);
      }
    }
  }
}

// One row (moe_experts.md), s its routing weight (1 when unweighted): dh' = w2^T dy;
// dweight = dh' . h (= dy . y); dw2 += dy (s h)^T; dh = s dh'; SwiGLU backward; dx, dw1, dw3. With
// round_bf16, the contract's roundings: dy, h, s h, dgate and dup. The row's dy is read before its
// dx is written, so dx may be dy (in place).
template <class T>
static double row_backward(int64_t d, int64_t f, double s, const T* dy, const T* x, const T* w1e,
                           const T* w3e, const T* w2e, T* dx, T* dw1e, T* dw3e, T* dw2e, bool round_bf16) {
  std::vector<double> g(f), u(f), h(f), dh(f, 0.0), dxr(d, 0.0), dyr(d);
  expert_hidden(d, f, x, w1e, w3e, g, u, h);
  for (int64_t i = 0; i < d; ++i) dyr[i] = rounded(dy[i], round_bf16);
  for (int64_t o = 0; o < f; ++o) h[o] = rounded(h[o], round_bf16);
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t o = 0; o < f; ++o) dh[o] += static_cast<double>(w2e[i * f + o]) * dyr[i];
  }
  double dweight = 0.0;
  for (int64_t o = 0; o < f; ++o) {
    dweight += dh[o] * h[o];
    const double sh = rounded(s * h[o], round_bf16);
    for (int64_t i = 0; i < d; ++i) dw2e[i * f + o] += static_cast<T>(dyr[i] * sh);
  }
  for (int64_t o = 0; o < f; ++o) {
    const double sg = sigmoid(g[o]), dho = s * dh[o];
    const double dg = rounded(dho * u[o] * sg * (1.0 + g[o] * (1.0 - sg)), round_bf16);
    const double du = rounded(dho * g[o] * sg, round_bf16);
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
                          const T* w3, const T* w2, T* dx, T* dw1, T* dw3, T* dw2, T* dweight,
                          bool round_bf16) {
  for (int64_t j = 0; j < e; ++j) {
    for (int64_t r = offsets[j]; r < offsets[j + 1]; ++r) {
      const double s = weight != nullptr ? static_cast<double>(weight[pair_of_row[r]]) : 1.0;
      const double dw = row_backward(d, f, s, dy + r * d, x + r * d, w1 + j * f * d,
                                     w3 + j * f * d, w2 + j * d * f, dx + r * d, dw1 + j * f * d,
                                     dw3 + j * f * d, dw2 + j * d * f, round_bf16);
      if (weight != nullptr) dweight[pair_of_row[r]] = static_cast<T>(dw);
    }
  }
}

#define TITAN_MOE_EXPERTS_REF_INSTANTIATE(T)                                                       \
  template void moe_experts_forward<T>(int64_t, int64_t, int64_t, const int64_t*, const T*,        \
                                       const T*, const T*, const T*, T*, T*, T*, bool);            \
  template void moe_experts_backward<T>(int64_t, int64_t, int64_t, const int64_t*, const T*,       \
                                        const T*, const int32_t*, const T*, const T*, const T*,    \
                                        const T*, T*, T*, T*, T*, T*, bool);
TITAN_MOE_EXPERTS_REF_INSTANTIATE(float)
TITAN_MOE_EXPERTS_REF_INSTANTIATE(double)
#undef TITAN_MOE_EXPERTS_REF_INSTANTIATE

}  // namespace ref

// bf16 operands: widened to f32 (exact), then the reference with the contract's roundings.
static Tensor widened(const Tensor& t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); }

static void forward_ref(const Tensor& x, const Tensor& offsets, const Tensor& w1, const Tensor& w3,
                        const Tensor& w2, Tensor& y, MoeExpertsSaved& saved) {
  const int64_t p = x.size(0), d = x.size(1), e = w1.size(0), f = w1.size(1);
  saved.gate_PF = Tensor::empty({p, f});
  saved.up_PF = Tensor::empty({p, f});
  const Tensor x32 = widened(x), w1_32 = widened(w1), w3_32 = widened(w3), w2_32 = widened(w2);
  ref::moe_experts_forward(e, d, f, offsets.data<int64_t>(), x32.data<float>(), w1_32.data<float>(),
                           w3_32.data<float>(), w2_32.data<float>(), y.data<float>(),
                           saved.gate_PF.data<float>(), saved.up_PF.data<float>(), x.dtype() == DType::bf16);
}

static void backward_ref(const Tensor& dy, const Tensor& weight, const Tensor& pair_of_row,
                         const Tensor& x, const Tensor& offsets, const Tensor& w1, const Tensor& w3,
                         const Tensor& w2, const MoeExpertsSaved&, Tensor& dx, Tensor& dw1,
                         Tensor& dw3, Tensor& dw2, Tensor& dweight) {
  const bool weighted = weight.defined();
  const Tensor x32 = widened(x), w1_32 = widened(w1), w3_32 = widened(w3), w2_32 = widened(w2);
  ref::moe_experts_backward(w1.size(0), x.size(1), w1.size(1), offsets.data<int64_t>(),
                            dy.data<float>(), weighted ? weight.data<float>() : nullptr,
                            weighted ? pair_of_row.data<int32_t>() : nullptr, x32.data<float>(),
                            w1_32.data<float>(), w3_32.data<float>(), w2_32.data<float>(), dx.data<float>(),
                            dw1.data<float>(), dw3.data<float>(), dw2.data<float>(),
                            weighted ? dweight.data<float>() : nullptr, x.dtype() == DType::bf16);
}

MoeExpertsImpl moe_experts_impl_ref() {
  return {"moe_experts_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
