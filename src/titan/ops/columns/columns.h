// A block of columns of an f32 [N, F] tensor (splitting rows that pack several pieces: Qwen3.5's
// q_proj, whose per-head rows are [query | gate]), and its gradient:
//   columns_forward:  y_NC[n, j] = x_NF[n, start + j]                     (y written =)
//   columns_backward: dx_NF[n, start + j] = dy_NC[n, j]                   (those columns =)
//     The other columns of dx are left as they are: a caller splitting x into pieces writes every
//     piece's gradient into one dx, so each column is written exactly once.
// Shapes: N rows, F columns of x, C of y, start + C <= F. Contiguous f32, 2-D. Bits are moved only.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

// Throws naming the tensor and what it expected.
void check_columns(const Tensor& x_NF, int64_t start, const Tensor& y_NC);

void columns_forward(const Tensor& x_NF, int64_t start, Tensor& y_NC);
void columns_backward(const Tensor& dy_NC, int64_t start, Tensor& dx_NF);

struct ColumnsTag;
using ColumnsImpl = OpImpl<bool (*)(const Tensor& x_NF), void (*)(const Tensor& x_NF, int64_t start, Tensor& y_NC),
                           void (*)(const Tensor& dy_NC, int64_t start, Tensor& dx_NF), ColumnsTag>;
OpTable<ColumnsImpl>& columns_table();
ColumnsImpl columns_impl_ref();
ColumnsImpl columns_impl_cpu();

}  // namespace titan::ops
