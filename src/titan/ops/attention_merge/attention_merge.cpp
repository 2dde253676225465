// Contract checks and dispatch.
#include "titan/ops/attention_merge/attention_merge.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

static bool is_f32(const Tensor& t, const Shape& shape) {
  return t.defined() && t.dtype() == DType::f32 && t.is_contiguous() && t.shape() == shape;
}

void check_attention_merge(std::span<const Tensor> outs, std::span<const Tensor> lses) {
  const int64_t parts = static_cast<int64_t>(outs.size());
  TITAN_CHECK(parts >= 1 && parts <= kMaxMergeParts && lses.size() == outs.size(), "[attention_merge] expected 1 to ",
              kMaxMergeParts, " parts with one lse each, got ", outs.size(), " outs and ", lses.size(), " lses");
  const Tensor& o = outs[0];
  TITAN_CHECK(o.defined() && o.ndim() == 4 && o.dtype() == DType::f32 && o.is_contiguous(),
              "[attention_merge] outs[0]: expected a contiguous f32 [B, T, H, Kv] tensor, got ", o.describe());
  const Shape out_shape = o.shape(), lse_shape{o.size(0), o.size(2), o.size(1)};
  for (int64_t r = 0; r < parts; ++r) {
    TITAN_CHECK(is_f32(outs[r], out_shape), "[attention_merge] outs[", r, "]: expected a contiguous f32",
                shape_str(out_shape), " like outs[0], got ", outs[r].describe(),
                ". HINT: the parts are attentions of the same query rows");
    TITAN_CHECK(is_f32(lses[r], lse_shape), "[attention_merge] lses[", r, "]: expected a contiguous f32",
                shape_str(lse_shape), " ([B, H, T] of outs[0]), got ", lses[r].describe());
  }
}

OpTable<AttentionMergeImpl>& attention_merge_table() {
  return builtin_table<AttentionMergeImpl>("attention_merge", register_builtin_attention_merge);
}

static void ensure(Tensor& t, const Shape& shape, Device device) {
  if (!t.defined() || t.shape() != shape || t.dtype() != DType::f32 || !t.is_contiguous() || t.device() != device) {
    t = Tensor::empty(shape, DType::f32, device);
  }
}

void attention_merge_forward(std::span<const Tensor> outs, std::span<const Tensor> lses, Tensor& out, Tensor& lse) {
  OpTimer timer("attention_merge_forward");
  check_attention_merge(outs, lses);
  ensure(out, outs[0].shape(), outs[0].device());
  ensure(lse, lses[0].shape(), outs[0].device());
  attention_merge_table().select(outs[0].device(), outs, lses).forward(outs, lses, out, lse);
}

void attention_merge_backward(const Tensor& dout, const Tensor& dlse, const Tensor& out, const Tensor& lse,
                              std::span<const Tensor> outs, std::span<const Tensor> lses, std::span<Tensor> douts,
                              std::span<Tensor> dlses) {
  OpTimer timer("attention_merge_backward");
  check_attention_merge(outs, lses);
  const Shape& out_shape = outs[0].shape();
  const Shape& lse_shape = lses[0].shape();
  TITAN_CHECK(is_f32(dout, out_shape) && is_f32(out, out_shape) && is_f32(lse, lse_shape),
              "[attention_merge] backward: dout ", dout.describe(), " and out ", out.describe(),
              " must be contiguous f32", shape_str(out_shape), ", lse ", lse.describe(), " f32", shape_str(lse_shape),
              ". HINT: pass what attention_merge_forward wrote");
  TITAN_CHECK(!dlse.defined() || is_f32(dlse, lse_shape), "[attention_merge] backward: dlse: expected nothing or f32",
              shape_str(lse_shape), ", got ", dlse.describe());
  TITAN_CHECK(douts.size() == outs.size() && dlses.size() == outs.size(), "[attention_merge] backward: expected ",
              outs.size(), " douts and dlses, got ", douts.size(), " and ", dlses.size());
  for (size_t r = 0; r < outs.size(); ++r) {
    ensure(douts[r], out_shape, outs[0].device());
    ensure(dlses[r], lse_shape, outs[0].device());
  }
  attention_merge_table()
      .select(outs[0].device(), outs, lses)
      .backward(dout, dlse, out, lse, outs, lses, douts, dlses);
}

}  // namespace titan::ops
