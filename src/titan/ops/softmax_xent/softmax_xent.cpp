// Contract checks and dispatch.
#include "titan/ops/softmax_xent/softmax_xent.h"

#include <algorithm>

#include "titan/ops/builtin.h"

namespace titan::ops {

static std::string describe_or_undefined(const Tensor& t) {
  return t.defined() ? t.describe() : std::string("an undefined tensor");
}

void check_lm_head_xent(const LmHeadXentArgs& args, const Tensor& x_ND, const Tensor& w_VD,
                        const Tensor& targets_N) {
  TITAN_CHECK(w_VD.defined() && w_VD.ndim() == 2 && (w_VD.dtype() == DType::f32 || w_VD.dtype() == DType::bf16) &&
                  w_VD.is_contiguous() && w_VD.size(0) > 0,
              "[lm_head_xent] weight: expected a contiguous f32 or bf16 [vocab, hidden] tensor with vocab > 0, got ",
              describe_or_undefined(w_VD));
  const int64_t v = w_VD.size(0), d = w_VD.size(1);
  const bool dtype_ok = x_ND.defined() && (x_ND.dtype() == w_VD.dtype() || x_ND.dtype() == DType::bf16);
  TITAN_CHECK(dtype_ok && x_ND.ndim() >= 1 && x_ND.is_contiguous() && x_ND.size(-1) == d,
              "[lm_head_xent] x: expected a contiguous ", w_VD.dtype() == DType::f32 ? "f32 or bf16" : "bf16",
              " [..., ", d, "] tensor, got ", describe_or_undefined(x_ND),
              ". HINT: x's last dim must equal the weight's hidden size, and x must have the weight's dtype or bf16 "
              "(weight ", w_VD.describe(), ")");
  const int64_t n = d == 0 ? 0 : x_ND.numel() / d;
  TITAN_CHECK(targets_N.defined() && targets_N.dtype() == DType::i64 && targets_N.is_contiguous() &&
                  targets_N.numel() == n,
              "[lm_head_xent] targets: expected a contiguous i64 tensor of ", n,
              " elements (one per row of x ", x_ND.describe(), "), got ", describe_or_undefined(targets_N),
              ". HINT: targets are token ids, shifted by one relative to the inputs");
  if (targets_N.is_meta()) return;  // the range check reads the targets
  const int64_t* t = targets_N.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    TITAN_CHECK(t[i] == args.ignore_index || (t[i] >= 0 && t[i] < v), "[lm_head_xent] targets[", i,
                "] = ", t[i], " is outside [0, ", v, ") and is not ignore_index (", args.ignore_index,
                "). HINT: the tokenizer's vocabulary must fit the model's vocab_size");
  }
}

int64_t count_targets(const Tensor& targets_N, int64_t ignore_index) {
  TITAN_CHECK(targets_N.defined() && targets_N.dtype() == DType::i64 && targets_N.is_contiguous(),
              "[lm_head_xent] targets: expected a contiguous i64 tensor, got ",
              describe_or_undefined(targets_N));
  const int64_t* t = targets_N.data<int64_t>();
  return std::count_if(t, t + targets_N.numel(), [&](int64_t id) { return id != ignore_index; });
}

int64_t lm_head_xent_chunk_tokens(const LmHeadXentArgs& args, int64_t num_tokens, int64_t vocab, DType operands) {
  int64_t c = args.chunk_tokens;
  const bool bf16 = operands == DType::bf16;
  const int64_t bytes_per_logit = bf16 ? 6 : 4, budget = bf16 ? kLmHeadXentChunkBytesBf16 : kLmHeadXentChunkBytes;
  if (c <= 0) c = budget / std::max<int64_t>(1, vocab * bytes_per_logit);
  return std::max<int64_t>(1, std::min(c, num_tokens));
}

OpTable<LmHeadXentImpl>& lm_head_xent_table() {
  return builtin_table<LmHeadXentImpl>("lm_head_xent", register_builtin_lm_head_xent);
}

LmHeadXentResult lm_head_xent(const LmHeadXentArgs& args, const Tensor& x_ND, const Tensor& w_VD,
                              const Tensor& targets_N, float grad_scale, Tensor& dx_ND,
                              Tensor& dw_VD) {
  OpTimer timer("lm_head_xent");
  check_lm_head_xent(args, x_ND, w_VD, targets_N);
  if (dx_ND.defined()) {
    TITAN_CHECK(dx_ND.shape() == x_ND.shape() && dx_ND.dtype() == DType::f32 && dx_ND.is_contiguous(),
                "[lm_head_xent] dx: expected f32", shape_str(x_ND.shape()), " like x, got ",
                dx_ND.describe());
  }
  if (dw_VD.defined()) {
    TITAN_CHECK(dw_VD.shape() == w_VD.shape() && dw_VD.dtype() == DType::f32 && dw_VD.is_contiguous(),
                "[lm_head_xent] dweight: expected f32", shape_str(w_VD.shape()),
                " like the weight, got ", dw_VD.describe());
  }
  const LmHeadXentImpl& impl = lm_head_xent_table().select(x_ND.device(), x_ND, w_VD, targets_N);
  if (!dx_ND.defined() && !dw_VD.defined()) return impl.forward(args, x_ND, w_VD, targets_N);
  return impl.backward(args, x_ND, w_VD, targets_N, grad_scale, dx_ND, dw_VD);
}

}  // namespace titan::ops
