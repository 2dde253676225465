// Linear (the GEMM seam's three forms as an op):
//   forward  y_NO  = x_NI w_OI^T (+ b_O)
//   backward dx_NI = dy_NO w_OI            (skipped when dx_NI is undefined)
//            dw_OI += dy_NO^T x_NI           (skipped when dw_OI is undefined: a frozen weight)
//            db_O  += sum_n dy_NO[n, :]    (when db_O is defined)
// Shapes: N rows (x may have any leading dims; they are flattened to N), I inputs, O outputs.
//   x_NI, w_OI, b_O (optional: an undefined Tensor{} means no bias) -> y_NO. Contiguous.
// Dtypes: x and w are both f32 or both bf16 (the bf16 compute path), or x is bf16 and w f32 (the
//   f32 master under bf16 compute: w is rounded to bf16 as the products read it, bit for bit the
//   bf16 path on w rounded first, with no bf16 copy of w where the kernel rounds while packing);
//   b, y, dy, dx, dw and db are f32. With bf16 x, the products accumulate in f32 and backward
//   rounds dy to bf16 before its two products (what autocast does: the bf16 output's gradient is
//   bf16).
//   y_NO / dy_NO may carry x's leading dims or be flat [N, O]; dx_NI has x's shape.
// Accumulation: dx is written (=); dw and db are accumulated (+=).
// Backward needs only x and w (no Saved struct): dx = dy w and dw = dy^T x are the two other
// products of the same three matrices.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Throws naming the tensor and the expected shape.
void check_linear(const Tensor& x_NI, const Tensor& w_OI, const Tensor& b_O);

void linear_forward(const Tensor& x_NI, const Tensor& w_OI, const Tensor& b_O, Tensor& y_NO);
void linear_backward(const Tensor& dy_NO, const Tensor& x_NI, const Tensor& w_OI, Tensor& dx_NI,
                     Tensor& dw_OI, Tensor& db_O);

using LinearImpl =
    OpImpl<bool (*)(const Tensor& x_NI, const Tensor& w_OI, const Tensor& b_O),
           void (*)(const Tensor& x_NI, const Tensor& w_OI, const Tensor& b_O, Tensor& y_NO),
           void (*)(const Tensor& dy_NO, const Tensor& x_NI, const Tensor& w_OI, Tensor& dx_NI,
                    Tensor& dw_OI, Tensor& db_O)>;
OpTable<LinearImpl>& linear_table();
LinearImpl linear_impl_ref();
LinearImpl linear_impl_cpu();

namespace ref {
// Scalar reference over raw row-major arrays; instantiated for float and double. b, dx, dw and db
// may be null (no bias / no input gradient / a frozen weight / no bias gradient).
template <class T>
void linear_forward(int64_t n, int64_t in, int64_t out, const T* x, const T* w, const T* b, T* y);
template <class T>
void linear_backward(int64_t n, int64_t in, int64_t out, const T* dy, const T* x, const T* w,
                     T* dx, T* dw, T* db);
}  // namespace ref

}  // namespace titan::ops
