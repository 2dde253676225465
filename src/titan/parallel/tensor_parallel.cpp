#include "titan/parallel/tensor_parallel.h"

#include <algorithm>

#include "titan/core/error.h"
#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/matmul/linear.h"
#include "titan/ops/vocab_parallel_xent/vocab_parallel_xent.h"

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
// columns, giving dw rows and a partial dx. The passes over the logits are the
// vocab_parallel_xent ops (ops/vocab_parallel_xent/vocab_parallel_xent.h).
ops::LmHeadXentResult TensorParallel::head_xent(const Tensor& x_ND, const Tensor& w_VD, int64_t vocab_start,
                                                const Tensor& targets_N, float grad_scale, Tensor& dx_ND,
                                                Tensor& dw_VD) {
  const int64_t n = x_ND.size(0), v = w_VD.size(0);
  const Tensor targets = targets_N.contiguous();
  TITAN_CHECK(targets.numel() == n, "[parallel] head: ", targets.numel(), " targets for ", n, " tokens");
  const Tensor x_in = ops::cast_to(x_ND, w_VD.dtype());  // the bf16 path's weight is bf16
  const int64_t chunk = std::max<int64_t>(1, std::min<int64_t>(n, ops::kLmHeadXentChunkBytes / (4 * v)));
  const ops::VocabParallelXentArgs args{.ignore_index = -100, .vocab_start = vocab_start};
  const bool grads = dx_ND.defined() || dw_VD.defined();
  ops::LmHeadXentResult result;
  for (int64_t c0 = 0; c0 < n; c0 += chunk) {
    const int64_t c = std::min(chunk, n - c0);
    const Tensor x = x_in.narrow(0, c0, c);
    const Tensor targets_C = targets.reshape({n}).narrow(0, c0, c);
    Tensor z = Tensor::empty({c, v});
    ops::linear_forward(x, w_VD, Tensor(), z);
    Tensor max_C = Tensor::empty({c}, DType::f64), stats_C2 = Tensor::empty({c, 2}, DType::f64);
    ops::vocab_parallel_xent_max(z, max_C);
    {
      CommTimer t{stats_.seconds};
      comm_.all_reduce_max(max_C);
    }
    ops::vocab_parallel_xent_sums(args, z, targets_C, max_C, stats_C2);
    {
      CommTimer t{stats_.seconds};
      comm_.all_reduce_sum(stats_C2);
      stats_.all_reduce_bytes += 3 * c * static_cast<int64_t>(sizeof(double));
    }
    ops::vocab_parallel_xent_combine(args, z, targets_C, max_C, stats_C2, grad_scale, grads, result);
    if (!grads) continue;
    Tensor dx = dx_ND.defined() ? dx_ND.narrow(0, c0, c) : Tensor();
    Tensor no_bias;
    ops::linear_backward(z, x, w_VD, dx, dw_VD, no_bias);
  }
  return result;
}

}  // namespace titan::parallel
