// Contract checks, tables and dispatch of the vocabulary-parallel cross-entropy ops.
#include "titan/ops/vocab_parallel_xent/vocab_parallel_xent.h"

#include <string>

#include "titan/ops/builtin.h"

namespace titan::ops {

// "f64[3, 2] on cpu", with ", non-contiguous" when it is: what a failed check found.
static std::string found(const Tensor& t) {
  if (!t.defined()) return "an undefined tensor";
  return t.describe() + " on " + device_name(t.device()) + (t.is_contiguous() ? "" : ", non-contiguous");
}

static bool is(const Tensor& t, DType dtype, int64_t numel, Device device) {
  return t.defined() && t.dtype() == dtype && t.is_contiguous() && t.numel() == numel && t.device() == device;
}

static void check_logits(const char* op, const Tensor& logits_CV) {
  TITAN_CHECK(logits_CV.defined() && logits_CV.ndim() == 2 && logits_CV.dtype() == DType::f32 &&
                  logits_CV.is_contiguous() && logits_CV.size(1) > 0,
              "[", op, "] logits: expected a contiguous f32 [tokens, vocab] tensor with vocab > 0, got ",
              found(logits_CV), ". HINT: the logits of one chunk of tokens over this rank's vocabulary columns");
}

void check_vocab_parallel_xent_max(const Tensor& logits_CV, const Tensor& max_C) {
  check_logits("vocab_parallel_xent_max", logits_CV);
  const int64_t c = logits_CV.size(0);
  TITAN_CHECK(is(max_C, DType::f64, c, logits_CV.device()), "[vocab_parallel_xent_max] max: expected a contiguous f64 [",
              c, "] tensor on ", device_name(logits_CV.device()), " (one per row of logits ", logits_CV.describe(),
              "), got ", found(max_C), ". HINT: Tensor::empty({rows}, DType::f64)");
}

void check_vocab_parallel_xent_stats(const char* op, const Tensor& logits_CV, const Tensor& targets_C,
                                     const Tensor& max_C, const Tensor& stats_C2) {
  check_logits(op, logits_CV);
  const int64_t c = logits_CV.size(0);
  const Device device = logits_CV.device();
  TITAN_CHECK(is(targets_C, DType::i64, c, device), "[", op, "] targets: expected a contiguous i64 tensor of ", c,
              " elements (one per row of logits ", logits_CV.describe(), "), got ", found(targets_C),
              ". HINT: the targets of the same chunk of tokens");
  TITAN_CHECK(is(max_C, DType::f64, c, device), "[", op, "] max: expected a contiguous f64 [", c, "] tensor, got ",
              found(max_C), ". HINT: vocab_parallel_xent_max's output, all-reduced (max) over the ranks");
  TITAN_CHECK(is(stats_C2, DType::f64, 2 * c, device) && stats_C2.ndim() == 2 && stats_C2.size(1) == 2, "[", op,
              "] stats: expected a contiguous f64 [", c, ", 2] tensor, got ", found(stats_C2),
              ". HINT: Tensor::empty({rows, 2}, DType::f64)");
}

OpTable<VocabParallelXentMaxImpl>& vocab_parallel_xent_max_table() {
  return builtin_table<VocabParallelXentMaxImpl>("vocab_parallel_xent_max", register_builtin_vocab_parallel_xent_max);
}
OpTable<VocabParallelXentSumsImpl>& vocab_parallel_xent_sums_table() {
  return builtin_table<VocabParallelXentSumsImpl>("vocab_parallel_xent_sums",
                                                  register_builtin_vocab_parallel_xent_sums);
}
OpTable<VocabParallelXentCombineImpl>& vocab_parallel_xent_combine_table() {
  return builtin_table<VocabParallelXentCombineImpl>("vocab_parallel_xent_combine",
                                                     register_builtin_vocab_parallel_xent_combine);
}

void vocab_parallel_xent_max(const Tensor& logits_CV, Tensor& max_C) {
  OpTimer timer("vocab_parallel_xent_max_forward");
  check_vocab_parallel_xent_max(logits_CV, max_C);
  vocab_parallel_xent_max_table().select(logits_CV.device(), logits_CV).forward(logits_CV, max_C);
}

void vocab_parallel_xent_sums(const VocabParallelXentArgs& args, const Tensor& logits_CV, const Tensor& targets_C,
                              const Tensor& max_C, Tensor& stats_C2) {
  OpTimer timer("vocab_parallel_xent_sums_forward");
  check_vocab_parallel_xent_stats("vocab_parallel_xent_sums", logits_CV, targets_C, max_C, stats_C2);
  vocab_parallel_xent_sums_table().select(logits_CV.device(), logits_CV).forward(args, logits_CV, targets_C, max_C,
                                                                                 stats_C2);
}

void vocab_parallel_xent_combine(const VocabParallelXentArgs& args, Tensor& logits_CV, const Tensor& targets_C,
                                 const Tensor& max_C, const Tensor& stats_C2, float grad_scale, bool grads,
                                 LmHeadXentResult& result) {
  OpTimer timer(grads ? "vocab_parallel_xent_combine_backward" : "vocab_parallel_xent_combine_forward");
  check_vocab_parallel_xent_stats("vocab_parallel_xent_combine", logits_CV, targets_C, max_C, stats_C2);
  const VocabParallelXentCombineImpl& impl = vocab_parallel_xent_combine_table().select(logits_CV.device(), logits_CV);
  if (grads) {
    impl.backward(args, logits_CV, targets_C, max_C, stats_C2, grad_scale, result);
  } else {
    impl.forward(args, targets_C, max_C, stats_C2, result);
  }
}

}  // namespace titan::ops
