// Newton–Schulz on CPU: the three products of each iteration through kernels::gemm_bf16 (bf16
// operands, f32 accumulation; the scaled addend preset in C with beta 1), rounded to bf16 between
// them. Matrices of a batch run one after another; each product is threaded inside the GEMM.
#include <algorithm>
#include <vector>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/gemm.h"
#include "titan/ops/newton_schulz/newton_schulz.h"

namespace titan::ops {
namespace {

constexpr int64_t kGrain = 1 << 14;

// dst = bf16(src) (bits), and src replaced by the rounded values.
void round_to(int64_t n, float* src, uint16_t* dst) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      dst[i] = f32_to_bf16(src[i]);
      src[i] = bf16_to_f32(dst[i]);
    }
  });
}

// dst = scale * src, in f32.
void scaled(int64_t n, float scale, const float* src, float* dst) {
  parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = scale * src[i];
  });
}

void iterate(int64_t r, int64_t c, float* x, const NewtonSchulzArgs& args) {
  const auto fa = static_cast<float>(args.a), fb = static_cast<float>(args.b), fc = static_cast<float>(args.c);
  std::vector<uint16_t> x16(static_cast<size_t>(r * c)), a16(static_cast<size_t>(r * r)), b16(a16.size());
  std::vector<float> a32(a16.size()), b32(a16.size());
  round_to(r * c, x, x16.data());  // x is bf16-exact already: this only fills x16
  for (int64_t step = 0; step < args.steps; ++step) {
    kernels::gemm_bf16(false, true, r, r, c, 1.0f, x16.data(), c, x16.data(), c, 0.0f, a32.data(), r);
    round_to(r * r, a32.data(), a16.data());
    scaled(r * r, fb, a32.data(), b32.data());
    kernels::gemm_bf16(false, false, r, r, r, fc, a16.data(), r, a16.data(), r, 1.0f, b32.data(), r);
    round_to(r * r, b32.data(), b16.data());
    scaled(r * c, fa, x, x);
    kernels::gemm_bf16(false, false, r, c, r, 1.0f, b16.data(), r, x16.data(), c, 1.0f, x, c);
    round_to(r * c, x, x16.data());
  }
}

void forward_cpu(const Tensor& g, Tensor& out, const NewtonSchulzArgs& args) {
  const int64_t R = g.size(-2), C = g.size(-1), n = R * C, batch = g.numel() / std::max<int64_t>(n, 1);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t m = 0; m < batch && n > 0; ++m) {
    newton_schulz_load(R, C, g.data<float>() + m * n, x.data(), args.eps);
    iterate(std::min(R, C), std::max(R, C), x.data(), args);
    newton_schulz_store(R, C, x.data(), out.data<float>() + m * n);
  }
}

}  // namespace

NewtonSchulzImpl newton_schulz_impl_cpu() { return {"newton_schulz_cpu", Device::cpu, nullptr, forward_cpu, nullptr}; }

}  // namespace titan::ops
