// Vocabulary-parallel softmax cross-entropy: the row statistics of a logits chunk whose vocabulary
// columns are split over the tensor-parallel ranks (parallel/tensor_parallel.cpp, head_xent). Each
// rank holds logits_CV for its vocabulary ids [vocab_start, vocab_start + V); the caller runs
// three ops with an all-reduce after each of the first two:
//   max:     max_C[i]      = max_j logits_CV[i, j]                    (then all-reduce max)
//   sums:    stats_C2[i,0] = sum_j exp(logits_CV[i, j] - max_C[i])     (then all-reduce sum)
//            stats_C2[i,1] = logits_CV[i, t_i - vocab_start] on the rank whose columns hold the
//                            target t_i, else 0 (and 0 where t_i is ignore_index)
//   combine: loss_sum    += log(stats[i,0]) + max[i] - stats[i,1]      over non-ignored rows
//            num_targets += number of non-ignored rows
//            with gradients, logits_CV is overwritten in place by
//              dlogits[i, j] = exp(logits[i, j] - max[i]) / stats[i,0] * grad_scale
//                              - [j == t_i - vocab_start] * grad_scale        (0 where ignored)
//            i.e. (softmax - onehot) * grad_scale on this rank's columns: the gradient of
//            loss_sum * grad_scale (the math: ../softmax_xent/softmax_xent.md; here the max and the
//            sum run over every rank's columns).
// Shapes: C tokens (a chunk), V this rank's vocabulary columns (V > 0). logits_CV f32; targets_C
// i64 (global vocabulary ids or ignore_index); max_C f64 [C]; stats_C2 f64 [C, 2]; all contiguous.
// Arithmetic (the contract, so that every implementation and every tensor-parallel degree give
// the same bits): the max is taken over the f32 logits and widened to f64; each exp is
// exp(double(logit) - max) in f64, summed over j in index order per row; the sum is formed for
// every row (an ignored row's is unused); the loss adds one row at a time, in row order, into the
// caller's running LmHeadXentResult (+=, so that a chunked caller sums in token order); each
// dlogit is rounded to f32 once, then the target's column subtracts grad_scale in f32.
// Accumulation: max and sums write their outputs (=); combine accumulates the loss (+=) and, with
// gradients, overwrites the logits with the dlogits (=).
// Never differentiated as ops: max and sums have a forward only (backward slot std::nullptr_t);
// combine's forward is the loss, its backward the loss and the dlogits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"
#include "titan/ops/softmax_xent/softmax_xent.h"

namespace titan::ops {

struct VocabParallelXentArgs {
  int64_t ignore_index = -100;
  int64_t vocab_start = 0;  // global id of this rank's first vocabulary column
};

// Throw naming the tensor, the shape and dtype expected and what was found.
void check_vocab_parallel_xent_max(const Tensor& logits_CV, const Tensor& max_C);
void check_vocab_parallel_xent_stats(const char* op, const Tensor& logits_CV, const Tensor& targets_C,
                                     const Tensor& max_C, const Tensor& stats_C2);

void vocab_parallel_xent_max(const Tensor& logits_CV, Tensor& max_C);
void vocab_parallel_xent_sums(const VocabParallelXentArgs& args, const Tensor& logits_CV, const Tensor& targets_C,
                              const Tensor& max_C, Tensor& stats_C2);
// max_C and stats_C2 are the all-reduced (global) ones. grads = false leaves logits_CV as it is.
void vocab_parallel_xent_combine(const VocabParallelXentArgs& args, Tensor& logits_CV, const Tensor& targets_C,
                                 const Tensor& max_C, const Tensor& stats_C2, float grad_scale, bool grads,
                                 LmHeadXentResult& result);

using VocabParallelXentMaxImpl =
    OpImpl<bool (*)(const Tensor& logits_CV), void (*)(const Tensor& logits_CV, Tensor& max_C), std::nullptr_t>;
using VocabParallelXentSumsImpl =
    OpImpl<bool (*)(const Tensor& logits_CV),
           void (*)(const VocabParallelXentArgs&, const Tensor& logits_CV, const Tensor& targets_C,
                    const Tensor& max_C, Tensor& stats_C2),
           std::nullptr_t>;
using VocabParallelXentCombineImpl =
    OpImpl<bool (*)(const Tensor& logits_CV),
           void (*)(const VocabParallelXentArgs&, const Tensor& targets_C, const Tensor& max_C,
                    const Tensor& stats_C2, LmHeadXentResult& result),
           void (*)(const VocabParallelXentArgs&, Tensor& logits_CV, const Tensor& targets_C, const Tensor& max_C,
                    const Tensor& stats_C2, float grad_scale, LmHeadXentResult& result)>;

OpTable<VocabParallelXentMaxImpl>& vocab_parallel_xent_max_table();
OpTable<VocabParallelXentSumsImpl>& vocab_parallel_xent_sums_table();
OpTable<VocabParallelXentCombineImpl>& vocab_parallel_xent_combine_table();
VocabParallelXentMaxImpl vocab_parallel_xent_max_impl_ref();
VocabParallelXentMaxImpl vocab_parallel_xent_max_impl_cpu();
VocabParallelXentSumsImpl vocab_parallel_xent_sums_impl_ref();
VocabParallelXentSumsImpl vocab_parallel_xent_sums_impl_cpu();
VocabParallelXentCombineImpl vocab_parallel_xent_combine_impl_ref();
VocabParallelXentCombineImpl vocab_parallel_xent_combine_impl_cpu();

namespace ref {
// Scalar references over raw row-major arrays, one row at a time, in the contract's arithmetic;
// instantiated for float (the registry's reference) and double (differentiated by the
// finite-difference test). combine: dlogits null computes the loss only; else it is the logits,
// overwritten with the dlogits.
template <class T>
void vocab_parallel_xent_max(int64_t c, int64_t v, const T* logits, double* max);
template <class T>
void vocab_parallel_xent_sums(const VocabParallelXentArgs& args, int64_t c, int64_t v, const T* logits,
                              const int64_t* targets, const double* max, double* stats);
template <class T>
void vocab_parallel_xent_combine(const VocabParallelXentArgs& args, int64_t c, int64_t v, const int64_t* targets,
                                 const double* max, const double* stats, T* dlogits, T grad_scale,
                                 LmHeadXentResult& result);
}  // namespace ref

}  // namespace titan::ops
