#include "titan/parallel/tensor_parallel.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "titan/core/error.h"
#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/matmul/linear.h"
#include "titan/ops/vocab_parallel_xent/vocab_parallel_xent.h"

namespace titan::parallel {
namespace {

std::map<std::string, nn::Parameter*> by_name(nn::Decoder& model) {
  std::map<std::string, nn::Parameter*> out;
  for (nn::Parameter* p : model.parameters()) out[p->fqn] = p;
  return out;
}

// whole[..., start:start+size along dim, ...] = part, for dim 0 or 1 of a 2-D tensor (or dim 0 of any).
void write_slice(Tensor& whole, int dim, int64_t start, const Tensor& part) {
  if (dim == 0) {
    Tensor rows = whole.narrow(0, start, part.size(0));
    rows.copy_from(part);
    return;
  }
  TITAN_CHECK(whole.ndim() == 2 && dim == 1, "[parallel] tensor-parallel slices are along dim 0 or 1 of a matrix");
  const int64_t rows = whole.size(0), cols = whole.size(1), pc = part.size(1);
  const float* src = part.data<float>();
  float* dst = whole.data<float>();
  for (int64_t i = 0; i < rows; ++i) std::memcpy(dst + i * cols + start, src + i * pc, static_cast<size_t>(pc) * sizeof(float));
}

}  // namespace

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
      comm_.all_reduce_max(max_C.data<double>(), c);
    }
    ops::vocab_parallel_xent_sums(args, z, targets_C, max_C, stats_C2);
    {
      CommTimer t{stats_.seconds};
      comm_.all_reduce_sum(stats_C2.data<double>(), 2 * c);
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

void copy_tp_shard(const models::ParallelPlan& plan, nn::Decoder& full, nn::Decoder& local, int64_t tp_rank,
                   int64_t tp_degree) {
  const std::map<std::string, nn::Parameter*> src = by_name(full);
  for (nn::Parameter* p : local.parameters()) {
    const Tensor& whole = src.at(p->fqn)->value;
    const int dim = plan.tp_split_dim(p->fqn);
    if (dim < 0) {
      p->value.copy_from(whole);
    } else {
      const int64_t size = p->value.size(dim);
      TITAN_CHECK(whole.size(dim) == size * tp_degree, "[parallel] ", p->fqn, ": ", whole.describe(), " is not ",
                  tp_degree, " x ", p->value.describe());
      p->value.copy_from(whole.narrow(dim, tp_rank * size, size).contiguous());
    }
  }
  for (size_t i = 0; i < local.buffers().size(); ++i) local.buffers()[i]->value.copy_from(full.buffers()[i]->value);
}

void gather_tp_shards(const models::ParallelPlan& plan, nn::Decoder& local, nn::Decoder& full, Comm& tp) {
  const std::map<std::string, nn::Parameter*> dst = by_name(full);
  const int64_t t = tp.size();
  for (nn::Parameter* p : local.parameters()) {
    Tensor& whole = dst.at(p->fqn)->value;
    const int dim = plan.tp_split_dim(p->fqn);
    const Tensor mine = p->value.contiguous();
    if (dim < 0) {
      whole.copy_from(mine);
      continue;
    }
    Tensor all = Tensor::empty({t * mine.numel()});
    tp.all_gather(mine, all);
    const int64_t size = mine.size(dim);
    for (int64_t r = 0; r < t; ++r) {
      write_slice(whole, dim, r * size, all.narrow(0, r * mine.numel(), mine.numel()).reshape(mine.shape()));
    }
  }
}

}  // namespace titan::parallel
