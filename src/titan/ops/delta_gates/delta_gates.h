// The gates of a gated DeltaNet layer (Qwen3.5 / Qwen3-Next linear attention), from the per-head
// projections a and b and two per-head parameters:
//   g = -exp(A_log) * softplus(a + dt_bias)     (the log decay, <= 0; ops/gated_delta's g)
//   beta = sigmoid(b)                           (the write strength; ops/gated_delta's beta)
// softplus as torch computes it: x for x > 20, else log(1 + exp(x)).
// Shapes: N tokens, H value heads. a_NH, b_NH -> g_NH, beta_NH (written =); a_log_H, dt_bias_H.
// Backward: da, db written (=); da_log, ddt_bias accumulated (+=), summed over the tokens.
// Saved: none. Derivation: delta_gates.md.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Throws naming the tensor and what it expected.
void check_delta_gates(const Tensor& a_NH, const Tensor& b_NH, const Tensor& a_log_H, const Tensor& dt_bias_H);

void delta_gates_forward(const Tensor& a_NH, const Tensor& b_NH, const Tensor& a_log_H, const Tensor& dt_bias_H,
                         Tensor& g_NH, Tensor& beta_NH);
void delta_gates_backward(const Tensor& dg_NH, const Tensor& dbeta_NH, const Tensor& a_NH, const Tensor& b_NH,
                          const Tensor& a_log_H, const Tensor& dt_bias_H, Tensor& da_NH, Tensor& db_NH,
                          Tensor& da_log_H, Tensor& ddt_bias_H);

using DeltaGatesImpl =
    OpImpl<bool (*)(const Tensor& a_NH, const Tensor& b_NH, const Tensor& a_log_H, const Tensor& dt_bias_H),
           void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&, Tensor&),
           void (*)(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, Tensor&,
                    Tensor&, Tensor&, Tensor&)>;
OpTable<DeltaGatesImpl>& delta_gates_table();
DeltaGatesImpl delta_gates_impl_ref();
DeltaGatesImpl delta_gates_impl_cpu();

namespace ref {
template <class T>
void delta_gates_forward(int64_t n, int64_t h, const T* a, const T* b, const T* a_log, const T* dt_bias, T* g,
                         T* beta);
template <class T>
void delta_gates_backward(int64_t n, int64_t h, const T* dg, const T* dbeta, const T* a, const T* b, const T* a_log,
                          const T* dt_bias, T* da, T* db, T* da_log, T* ddt_bias);
}  // namespace ref

}  // namespace titan::ops
