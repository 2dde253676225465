// Scalar reference for RMSNorm: plain loops, accumulation in double.
#include <cmath>

#include "titan/ops/rms_norm/rms_norm.h"

namespace titan::ops {
namespace ref {

template <class T>
void rms_norm_forward(float eps, int64_t n, int64_t d, const T* x, const T* weight, T* y, T* rstd) {
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * d;
    double sum_sq = 0.0;
    for (int64_t j = 0; j < d; ++j) sum_sq += static_cast<double>(xi[j]) * xi[j];
    const double r = 1.0 / std::sqrt(sum_sq / static_cast<double>(d) + eps);
    rstd[i] = static_cast<T>(r);
    for (int64_t j = 0; j < d; ++j) y[i * d + j] = static_cast<T>(weight[j] * (xi[j] * r));
  }
}

template <class T>
void rms_norm_backward(int64_t n, int64_t d, const T* dy, const T* x, const T* weight,
                       const T* rstd, T* dx, T* dweight) {
  for (int64_t i = 0; i < n; ++i) {
    const T* xi = x + i * d;
    const T* dyi = dy + i * d;
    const double r = rstd[i];
    // dx = r * (w*dy - xhat * mean(w*dy*xhat)), xhat = x * r.
    double dot = 0.0;
    for (int64_t j = 0; j < d; ++j) dot += static_cast<double>(weight[j]) * dyi[j] * xi[j] * r;
    const double mean = dot / static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = xi[j] * r;
      dx[i * d + j] = static_cast<T>(r * (weight[j] * dyi[j] - xhat * mean));
      dweight[j] += static_cast<T>(dyi[j] * xhat);
    }
  }
}

template void rms_norm_forward<float>(float, int64_t, int64_t, const float*, const float*, float*, float*);
template void rms_norm_forward<double>(float, int64_t, int64_t, const double*, const double*, double*, double*);
template void rms_norm_backward<float>(int64_t, int64_t, const float*, const float*, const float*, const float*, float*, float*);
template void rms_norm_backward<double>(int64_t, int64_t, const double*, const double*, const double*, const double*, double*, double*);

}  // namespace ref

static void forward_ref(const RmsNormArgs& args, const Tensor& x, const Tensor& w, Tensor& y,
                        RmsNormSaved& saved) {
  const std::vector<float> shifted = args.weight_offset != 0.0f ? offset_weight(args, w) : std::vector<float>();
  ref::rms_norm_forward(args.eps, x.size(0), x.size(1), x.data<float>(), shifted.empty() ? w.data<float>() : shifted.data(),
                        y.data<float>(), saved.rstd_N.data<float>());
}

static void backward_ref(const RmsNormArgs& args, const Tensor& dy, const Tensor& x, const Tensor& w,
                         const RmsNormSaved& saved, Tensor& dx, Tensor& dw) {
  const std::vector<float> shifted = args.weight_offset != 0.0f ? offset_weight(args, w) : std::vector<float>();
  ref::rms_norm_backward(x.size(0), x.size(1), dy.data<float>(), x.data<float>(),
                         shifted.empty() ? w.data<float>() : shifted.data(), saved.rstd_N.data<float>(),
                         dx.data<float>(), dw.data<float>());
}

RmsNormImpl rms_norm_impl_ref() { return {"rms_norm_ref", Device::cpu, nullptr, forward_ref, backward_ref}; }

}  // namespace titan::ops
