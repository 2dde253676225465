// Newton–Schulz orthogonalisation: Muon's "zeroth power" of an update matrix, as torch.optim.Muon
// computes it (_zeropower_via_newtonschulz, PyTorch 2.9+). For each R x C matrix G of the input:
//   X  = bf16(G), transposed when R > C (so X is r x c with r = min(R, C))
//   X  = bf16(X / max(bf16(||X||_F), bf16(eps)))
//   repeat `steps` times:
//     A = bf16(X X^T)                      r x r
//     B = bf16(b A + c A A)
//     X = bf16(a X + B X)
//   out = X, transposed back when R > C
// bf16(.) is round-to-nearest-even of an f32 value; every product accumulates in f32 and is
// rounded once, after its scaled addend (torch.addmm's beta * input) is added. The result
// approximates U V^T of G's SVD with singular values in about [0.7, 1.2] (Muon's quintic
// deliberately overshoots), not an exact polar factor.
// Shapes: g and out f32, contiguous, [..., R, C]: the leading dimensions are a batch of matrices
// (stacked MoE expert weights), each orthogonalised on its own; out holds bf16-exact f32 values.
// g is read only; out must not overlap it. An optimizer step is never differentiated: forward
// only (the backward slot is std::nullptr_t).
#pragma once

#include <cstddef>
#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct NewtonSchulzArgs {
  double a = 3.4445;  // torch.optim.Muon's DEFAULT_A, DEFAULT_B, DEFAULT_C
  double b = -4.7750;
  double c = 2.0315;
  int64_t steps = 5;  // DEFAULT_NS_STEPS
  double eps = 1e-7;  // EPS: the norm's floor
};

// Throws naming the tensor (or argument), what was found and what was expected.
void check_newton_schulz(const Tensor& g, const Tensor& out, const NewtonSchulzArgs& args);

void newton_schulz(const Tensor& g, Tensor& out, const NewtonSchulzArgs& args);

using NewtonSchulzImpl = OpImpl<bool (*)(const Tensor& g),
                                void (*)(const Tensor& g, Tensor& out, const NewtonSchulzArgs& args),
                                std::nullptr_t>;
OpTable<NewtonSchulzImpl>& newton_schulz_table();
NewtonSchulzImpl newton_schulz_impl_ref();
NewtonSchulzImpl newton_schulz_impl_cpu();

// The steps both kernels share, per matrix of R x C f32 values `g`: x (min(R, C) x max(R, C))
// gets bf16(G) (transposed when R > C) divided by its clamped bf16 Frobenius norm, rounded; and
// back: out gets x, transposed back when R > C.
void newton_schulz_load(int64_t R, int64_t C, const float* g, float* x, double eps);
void newton_schulz_store(int64_t R, int64_t C, const float* x, float* out);

namespace ref {
// One r x c matrix (r <= c), already transposed if needed: x holds bf16-exact f32 values and is
// replaced by the result. Plain loops, f32 accumulation in index order.
void newton_schulz(int64_t r, int64_t c, float* x, const NewtonSchulzArgs& args);
}  // namespace ref

}  // namespace titan::ops
