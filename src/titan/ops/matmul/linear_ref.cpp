// Scalar reference for Linear: plain loops, accumulation in double.
#include "titan/ops/matmul/linear.h"

namespace titan::ops {
namespace ref {

template <class T>
void linear_forward(int64_t n, int64_t in, int64_t out, const T* x, const T* w, const T* b, T* y) {
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double acc = b != nullptr ? static_cast<double>(b[o]) : 0.0;
      for (int64_t i = 0; i < in; ++i) acc += static_cast<double>(x[r * in + i]) * w[o * in + i];
      y[r * out + o] = static_cast<T>(acc);
    }
  }
}

template <class T>
void linear_backward(int64_t n, int64_t in, int64_t out, const T* dy, const T* x, const T* w,
                     T* dx, T* dw, T* db) {
  if (dx != nullptr) {  // dx[r, i] = sum_o dy[r, o] w[o, i]
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t i = 0; i < in; ++i) {
        double acc = 0.0;
        for (int64_t o = 0; o < out; ++o) acc += static_cast<double>(dy[r * out + o]) * w[o * in + i];
        dx[r * in + i] = static_cast<T>(acc);
      }
    }
  }
  for (int64_t o = 0; dw != nullptr && o < out; ++o) {  // dw[o, i] += sum_r dy[r, o] x[r, i]
    for (int64_t i = 0; i < in; ++i) {
      double acc = 0.0;
      for (int64_t r = 0; r < n; ++r) acc += static_cast<double>(dy[r * out + o]) * x[r * in + i];
      dw[o * in + i] = static_cast<T>(dw[o * in + i] + acc);
    }
  }
  if (db != nullptr) {  // db[o] += sum_r dy[r, o]
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int64_t r = 0; r < n; ++r) acc += dy[r * out + o];
      db[o] = static_cast<T>(db[o] + acc);
    }
  }
}

template void linear_forward<float>(int64_t, int64_t, int64_t, const float*, const float*, const float*, float*);
template void linear_forward<double>(int64_t, int64_t, int64_t, const double*, const double*, const double*, double*);
template void linear_backward<float>(int64_t, int64_t, int64_t, const float*, const float*, const float*, float*, float*, float*);
template void linear_backward<double>(int64_t, int64_t, int64_t, const double*, const double*, const double*, double*, double*, double*);

}  // namespace ref

// bf16 x and w: widened to f32 (exact), and dy rounded to bf16 as the contract says; then the
// f32 reference, whose products of bf16 values are exact. An f32 w beside bf16 x is rounded first.
static Tensor widened(const Tensor& t) { return t.dtype() == DType::f32 ? t : t.to(DType::f32); }
static Tensor weight_widened(const Tensor& x, const Tensor& w) {
  return x.dtype() == DType::bf16 ? w.to(DType::bf16).to(DType::f32) : w;
}

static void forward_ref(const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const int64_t in = w.size(1), out = w.size(0);
  const Tensor x32 = widened(x), w32 = weight_widened(x, w);
  ref::linear_forward(x.numel() / in, in, out, x32.data<float>(), w32.data<float>(),
                      b.defined() ? b.data<float>() : nullptr, y.data<float>());
}

static void backward_ref(const Tensor& dy, const Tensor& x, const Tensor& w, Tensor& dx, Tensor& dw,
                         Tensor& db) {
  const int64_t in = w.size(1), out = w.size(0);
  const Tensor x32 = widened(x), w32 = weight_widened(x, w);
  const Tensor dy_products = x.dtype() == DType::bf16 ? dy.to(DType::bf16).to(DType::f32) : dy;
  const int64_t n = x.numel() / in;
  ref::linear_backward(n, in, out, dy_products.data<float>(), x32.data<float>(), w32.data<float>(),
                       dx.defined() ? dx.data<float>() : nullptr, dw.defined() ? dw.data<float>() : nullptr,
                       static_cast<float*>(nullptr));
  // The bias gradient sums dy itself (f32; it is no product).
  if (db.defined()) {
    const float* dyp = dy.data<float>();
    float* dbp = db.data<float>();
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int64_t r = 0; r < n; ++r) acc += dyp[r * out + o];
      dbp[o] = static_cast<float>(dbp[o] + acc);
    }
  }
}

LinearImpl linear_impl_ref() { return {"linear_ref", Device::cpu, nullptr, forward_ref, backward_ref}; }

}  // namespace titan::ops
