// Scalar reference for Newton–Schulz: plain triple loops, each dot product accumulated in f32 in
// index order, then the scaled addend added and the sum rounded to bf16 (the contract's order).
#include <vector>

#include "titan/ops/newton_schulz/newton_schulz.h"

namespace titan::ops {
namespace ref {

static float round_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)); }

void newton_schulz(int64_t r, int64_t c, float* x, const NewtonSchulzArgs& args) {
  const auto fa = static_cast<float>(args.a), fb = static_cast<float>(args.b), fc = static_cast<float>(args.c);
  std::vector<float> A(static_cast<size_t>(r * r)), B(A.size()), X(x, x + r * c);
  for (int64_t step = 0; step < args.steps; ++step) {
    for (int64_t i = 0; i < r; ++i) {  // A = X X^T
      for (int64_t j = 0; j < r; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < c; ++k) s += X[i * c + k] * X[j * c + k];
        A[i * r + j] = round_bf16(s);
      }
    }
    for (int64_t i = 0; i < r; ++i) {  // B = b A + c A A
      for (int64_t j = 0; j < r; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < r; ++k) s += A[i * r + k] * A[k * r + j];
        B[i * r + j] = round_bf16(fb * A[i * r + j] + fc * s);
      }
    }
    std::vector<float> next(X.size());
    for (int64_t i = 0; i < r; ++i) {  // X = a X + B X
      for (int64_t j = 0; j < c; ++j) {
        float s = 0.0f;
        for (int64_t k = 0; k < r; ++k) s += B[i * r + k] * X[k * c + j];
        next[i * c + j] = round_bf16(fa * X[i * c + j] + s);
      }
    }
    X.swap(next);
  }
  std::copy(X.begin(), X.end(), x);
}

}  // namespace ref

static void forward_ref(const Tensor& g, Tensor& out, const NewtonSchulzArgs& args) {
  const int64_t R = g.size(-2), C = g.size(-1), n = R * C, batch = g.numel() / std::max<int64_t>(n, 1);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t m = 0; m < batch && n > 0; ++m) {
    newton_schulz_load(R, C, g.data<float>() + m * n, x.data(), args.eps);
    ref::newton_schulz(std::min(R, C), std::max(R, C), x.data(), args);
    newton_schulz_store(R, C, x.data(), out.data<float>() + m * n);
  }
}

NewtonSchulzImpl newton_schulz_impl_ref() { return {"newton_schulz_ref", Device::cpu, nullptr, forward_ref, nullptr}; }

}  // namespace titan::ops
