// Fused lm_head + softmax cross-entropy, chunked over tokens so that the fp32 [tokens, vocab]
// logits never exist whole (151,936 x 4 bytes per token for Qwen3):
//   logits_NV = x_ND w_VD^T
//   loss_sum  = sum over n with target_n != ignore_index of (logsumexp(logits_n) - logits_n[target_n])
// and, when gradient tensors are given, the gradients of (loss_sum * grad_scale):
//   dlogits_NV = (softmax(logits_n) - onehot(target_n)) * grad_scale   (zero rows where ignored)
//   dx_ND  = dlogits_NV w_VD          (written, =)
//   dw_VD += dlogits_NV^T x_ND        (accumulated, +=)
// Shapes: N tokens (x and targets may have any leading dims; flattened), D hidden, V vocab.
//   x_ND, w_VD (lm_head weight or the tied embedding): both f32, or x bf16 with w bf16 or f32 (the
//   bf16 compute path: an f32 w is rounded to bf16 as the products read it, the same values as
//   rounding it first, without a bf16 copy of V x D where kernels::gemm_bf16_rounds_b_while_packing;
//   products accumulate in f32, the softmax and loss stay f32, and dlogits are rounded to bf16
//   before the dx and dw products); targets_N i64; dx_ND and dw_VD f32.
// grad_scale is typically 1 / (number of targets in the global batch), so that the gradients
// are those of the mean loss while loss_sum and num_targets stay exact sums to all-reduce.
// Design, derivation and memory bound: softmax_xent.md.
#pragma once

#include "titan/core/tensor.h"
#include "titan/ops/registry.h"

namespace titan::ops {

struct LmHeadXentArgs {
  int64_t ignore_index = -100;
  // Tokens per chunk; 0 = auto: as many as keep the chunk's buffers within kLmHeadXentChunkBytes
  // (f32 operands: the [chunk, V] f32 logits) or kLmHeadXentChunkBytesBf16 (bf16 operands: those
  // logits and their [chunk, V] bf16 rounding).
  int64_t chunk_tokens = 0;
  // bf16 operands with gradients on AMX: the bf16 dlogits of all chunks are kept (N x V x 2 bytes,
  // at most this many) and dx, dw computed from them once after the last chunk instead of per
  // chunk (lm_head_xent_keeps_all_dlogits). 0 keeps the per-chunk products (tests compare the two).
  int64_t all_dlogits_bytes = int64_t{1} << 30;
};

struct LmHeadXentResult {
  double loss_sum = 0.0;    // sum over non-ignored targets of (logsumexp - target logit)
  int64_t num_targets = 0;  // number of non-ignored targets
};

// Budgets of the auto-sized logits chunk (bytes). bf16's is half: its GEMMs (titan's kernel, one
// pass over dW for any chunk up to 4096 tokens) run as fast at ~300 tokens as at ~600 on the bench
// config, and the 256 MiB saved are 6% of that step's peak (docs/performance.md (w)). f32 keeps
// 512 MiB: on AVX2 its dW GEMM lost 16% at a quarter of it (performance.md (b)).
constexpr int64_t kLmHeadXentChunkBytes = int64_t{512} << 20;
constexpr int64_t kLmHeadXentChunkBytesBf16 = int64_t{256} << 20;

// True where the CPU kernel keeps the bf16 dlogits of all N tokens (see all_dlogits_bytes): bf16
// operands, gemm_bf16 on AMX tiles (titan's AMX kernel runs the head's dx and dw at 1.54 / 1.55
// TFLOP/s as one product over 2,048 tokens, 1.10 / 1.16 per chunk of 294, where dw's f32 C is
// read and written back once per chunk; softmax_xent.md), and N x V bf16 within the budget.
bool lm_head_xent_keeps_all_dlogits(const LmHeadXentArgs& args, int64_t num_tokens, int64_t vocab, DType operands);

// Throws naming the tensor and the expected shape; also checks every target is ignore_index or
// in [0, V) (naming the first bad index and value).
void check_lm_head_xent(const LmHeadXentArgs& args, const Tensor& x_ND, const Tensor& w_VD,
                        const Tensor& targets_N);

// Loss (and, when dx_ND / dw_VD are defined, gradients) in one pass. Either gradient may be
// undefined (Tensor{}) to skip it; with both undefined only the loss is computed.
LmHeadXentResult lm_head_xent(const LmHeadXentArgs& args, const Tensor& x_ND, const Tensor& w_VD,
                              const Tensor& targets_N, float grad_scale, Tensor& dx_ND,
                              Tensor& dw_VD);

// Number of targets that are not ignore_index.
int64_t count_targets(const Tensor& targets_N, int64_t ignore_index = -100);

// Tokens per chunk for the given args (resolves chunk_tokens = 0), at least 1. With bf16 operands
// the chunk also holds the bf16 dlogits (6 bytes per logit instead of 4), within the bf16 budget.
int64_t lm_head_xent_chunk_tokens(const LmHeadXentArgs& args, int64_t num_tokens, int64_t vocab,
                                  DType operands = DType::f32);

// The registry entry: `forward` computes the loss only; `backward` computes the loss and the
// gradients in the same pass (the fused path; no forward has to run before it).
using LmHeadXentImpl = OpImpl<
    bool (*)(const Tensor& x_ND, const Tensor& w_VD, const Tensor& targets_N),
    LmHeadXentResult (*)(const LmHeadXentArgs&, const Tensor& x_ND, const Tensor& w_VD,
                         const Tensor& targets_N),
    LmHeadXentResult (*)(const LmHeadXentArgs&, const Tensor& x_ND, const Tensor& w_VD,
                         const Tensor& targets_N, float grad_scale, Tensor& dx_ND, Tensor& dw_VD)>;
OpTable<LmHeadXentImpl>& lm_head_xent_table();
LmHeadXentImpl lm_head_xent_impl_ref();
LmHeadXentImpl lm_head_xent_impl_cpu();
LmHeadXentImpl lm_head_xent_impl_meta();  // the CPU kernel's allocations, no values

namespace ref {
// Scalar reference over raw row-major arrays, one token row of V logits at a time, in double;
// instantiated for float and double. dx and dw may be null (skipped). bf16_dlogits rounds each
// dlogit to bf16 before the gradient products (the bf16 path's contract).
template <class T>
LmHeadXentResult lm_head_xent(int64_t ignore_index, int64_t n, int64_t d, int64_t v, const T* x,
                              const T* w, const int64_t* targets, double grad_scale, T* dx, T* dw,
                              bool bf16_dlogits = false);
}  // namespace ref

}  // namespace titan::ops
