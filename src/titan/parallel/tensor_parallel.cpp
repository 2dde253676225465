#include "titan/parallel/tensor_parallel.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "titan/core/error.h"
#include "titan/core/parallel.h"
#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/matmul/linear.h"

namespace titan::parallel {
void TensorParallel::all_reduce(Tensor& x) {
  CommTimer t{stats_.seconds};
  comm_.all_reduce_sum(x);
  stats_.all_reduce_bytes += static_cast<int64_t>(x.nbytes());
}

Tensor TensorParallel::gather_tokens(const Tensor& x_ND) {
  const Tensor x = x_ND.contiguous();
  Tensor out = Tensor::empty({x.size(0) * degree(), x.size(1)});
  CommTimer t{stats_.seconds};
  comm_.all_gather(x, out);
  stats_.all_gather_bytes += static_cast<int64_t>(out.nbytes());
  return out;
}

Tensor TensorParallel::scatter_tokens(const Tensor& full_ND) {
  const Tensor full = full_ND.contiguous();
  TITAN_CHECK(full.size(0) % degree() == 0, "[parallel] sequence parallel: ", full.size(0),
              " tokens do not split over tensor_parallel_degree = ", degree());
  Tensor out = Tensor::empty({full.size(0) / degree(), full.size(1)});
  CommTimer t{stats_.seconds};
  comm_.reduce_scatter_sum(full, out);
  stats_.reduce_scatter_bytes += static_cast<int64_t>(full.nbytes());
  return out;
}

Tensor TensorParallel::enter(const Tensor& x_ND) { return sequence_parallel_ ? gather_tokens(x_ND) : x_ND; }

Tensor TensorParallel::enter_backward(const Tensor& dx_full_ND) {
  if (sequence_parallel_) return scatter_tokens(dx_full_ND);
  Tensor dx = dx_full_ND.contiguous();
  all_reduce(dx);
  return dx;
}

Tensor TensorParallel::leave(const Tensor& partial_ND) {
  if (sequence_parallel_) return scatter_tokens(partial_ND);
  Tensor y = partial_ND.contiguous();
  all_reduce(y);
  return y;
}

Tensor TensorParallel::leave_backward(const Tensor& dy_ND) { return sequence_parallel_ ? gather_tokens(dy_ND) : dy_ND; }

// Per chunk of tokens: local logits [C, V_l]; the global row max, then the global sum of
// exp(z - max) and the target logit (from the rank that holds it), each one all-reduce over tp;
// loss = log(sum) + max - z_target; dlogits = (softmax - onehot) * grad_scale on this rank's
// columns, giving dw rows and a partial dx.
ops::LmHeadXentResult TensorParallel::head_xent(const Tensor& x_ND, const Tensor& w_VD, int64_t vocab_start,
                                                const Tensor& targets_N, float grad_scale, Tensor& dx_ND,
                                                Tensor& dw_VD) {
  const int64_t n = x_ND.size(0), v = w_VD.size(0);
  const Tensor targets = targets_N.contiguous();
  TITAN_CHECK(targets.numel() == n, "[parallel] head: ", targets.numel(), " targets for ", n, " tokens");
  const int64_t* tgt = targets.data<int64_t>();
  const Tensor x_in = ops::cast_to(x_ND, w_VD.dtype());  // the bf16 path's weight is bf16
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n, ops::kLmHeadXentChunkBytes / (4 * v)));
  ops::LmHeadXentResult result;
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t c = std::min(chunk, n - c0);
    const Tensor x = x_in.narrow(0, c0, c);
    Tensor z = Tensor::empty({c, v});
    ops::linear_forward(x, w_VD, Tensor(), z);
    float* zp = z.data<float>();
    std::vector<double> max(static_cast<size_t>(c)), stats(static_cast<size_t>(2 * c), 0.0);
    parallel_for(c, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float* row = zp + i * v;
        max[static_cast<size_t>(i)] = *std::max_element(row, row + v);
      }
    });
    {
      CommTimer t{stats_.seconds};
      comm_.all_reduce_max(max.data(), c);
    }
    parallel_for(c, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const float* row = zp + i * v;
        const double m = max[static_cast<size_t>(i)];
        double sum = 0.0;
        for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(row[j]) - m);
        stats[static_cast<size_t>(2 * i)] = sum;
        const int64_t local = tgt[c0 + i] - vocab_start;
        if (tgt[c0 + i] != -100 && local >= 0 && local < v) stats[static_cast<size_t>(2 * i + 1)] = row[local];
      }
    });
    {
      CommTimer t{stats_.seconds};
      comm_.all_reduce_sum(stats.data(), 2 * c);
      stats_.all_reduce_bytes += 3 * c * static_cast<int64_t>(sizeof(double));
    }
    const bool grads = dx_ND.defined() || dw_VD.defined();
    for (int64_t i = 0; i < c; ++i) {
      if (tgt[c0 + i] == -100) continue;
      result.loss_sum += std::log(stats[static_cast<size_t>(2 * i)]) + max[static_cast<size_t>(i)] -
                         stats[static_cast<size_t>(2 * i + 1)];
      ++result.num_targets;
    }
    if (!grads) continue;
    parallel_for(c, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        float* row = zp + i * v;
        if (tgt[c0 + i] == -100) {
          std::fill(row, row + v, 0.0f);
          continue;
        }
        const double m = max[static_cast<size_t>(i)], s = stats[static_cast<size_t>(2 * i)];
        for (int64_t j = 0; j < v; ++j) {
          row[j] = static_cast<float>(std::exp(static_cast<double>(row[j]) - m) / s * grad_scale);
        }
        const int64_t local = tgt[c0 + i] - vocab_start;
        if (local >= 0 && local < v) row[local] -= grad_scale;
      }
    });
    Tensor dx = dx_ND.defined() ? dx_ND.narrow(0, c0, c) : Tensor();
    Tensor no_bias;
    ops::linear_backward(z, x, w_VD, dx, dw_VD, no_bias);
  }
  return result;
}

}  // namespace titan::parallel
