// Scalar reference for the DeltaNet gates: plain loops, math in double.
#include <cmath>
#include <vector>

#include "titan/ops/delta_gates/delta_gates.h"
#include "titan/ops/scalar_math.h"

namespace titan::ops {
namespace ref {

namespace {

// torch.nn.functional.softplus (beta 1, threshold 20).
double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }
double softplus_grad(double x) { return x > 20.0 ? 1.0 : sigmoid(x); }

}  // namespace

template <class T>
void delta_gates_forward(int64_t n, int64_t h, const T* a, const T* b, const T* a_log, const T* dt_bias, T* g,
                         T* beta) {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < h; ++j) {
      const double x = static_cast<double>(a[i * h + j]) + dt_bias[j];
      g[i * h + j] = static_cast<T>(-std::exp(static_cast<double>(a_log[j])) * softplus(x));
      beta[i * h + j] = static_cast<T>(sigmoid(b[i * h + j]));
    }
  }
}

template <class T>
void delta_gates_backward(int64_t n, int64_t h, const T* dg, const T* dbeta, const T* a, const T* b, const T* a_log,
                          const T* dt_bias, T* da, T* db, T* da_log, T* ddt_bias) {
  std::vector<double> sum_log(h, 0.0), sum_dt(h, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < h; ++j) {
      const double x = static_cast<double>(a[i * h + j]) + dt_bias[j], e = std::exp(static_cast<double>(a_log[j]));
      const double d = dg[i * h + j], dx = -d * e * softplus_grad(x);
      da[i * h + j] = static_cast<T>(dx);
      sum_dt[j] += dx;
      sum_log[j] += d * -e * softplus(x);  // d g / d A_log = g
      const double s = sigmoid(b[i * h + j]);
      db[i * h + j] = static_cast<T>(static_cast<double>(dbeta[i * h + j]) * s * (1.0 - s));
    }
  }
  for (int64_t j = 0; j < h; ++j) {
    da_log[j] = static_cast<T>(da_log[j] + sum_log[j]);
    ddt_bias[j] = static_cast<T>(ddt_bias[j] + sum_dt[j]);
  }
}

template void delta_gates_forward<float>(int64_t, int64_t, const float*, const float*, const float*, const float*,
                                         float*, float*);
template void delta_gates_forward<double>(int64_t, int64_t, const double*, const double*, const double*,
                                          const double*, double*, double*);
template void delta_gates_backward<float>(int64_t, int64_t, const float*, const float*, const float*, const float*,
                                          const float*, const float*, float*, float*, float*, float*);
template void delta_gates_backward<double>(int64_t, int64_t, const double*, const double*, const double*,
                                           const double*, const double*, const double*, double*, double*, double*,
                                           double*);

}  // namespace ref

static void forward_ref(const Tensor& a, const Tensor& b, const Tensor& a_log, const Tensor& dt_bias, Tensor& g,
                        Tensor& beta) {
  ref::delta_gates_forward(a.size(0), a.size(1), a.data<float>(), b.data<float>(), a_log.data<float>(),
                           dt_bias.data<float>(), g.data<float>(), beta.data<float>());
}

static void backward_ref(const Tensor& dg, const Tensor& dbeta, const Tensor& a, const Tensor& b, const Tensor& a_log,
                         const Tensor& dt_bias, Tensor& da, Tensor& db, Tensor& da_log, Tensor& ddt_bias) {
  ref::delta_gates_backward(a.size(0), a.size(1), dg.data<float>(), dbeta.data<float>(), a.data<float>(),
                            b.data<float>(), a_log.data<float>(), dt_bias.data<float>(), da.data<float>(),
                            db.data<float>(), da_log.data<float>(), ddt_bias.data<float>());
}

DeltaGatesImpl delta_gates_impl_ref() { return {"delta_gates_ref", Device::cpu, nullptr, forward_ref, backward_ref}; }

}  // namespace titan::ops
