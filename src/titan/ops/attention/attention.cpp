// Contract checks and dispatch.
#include "titan/ops/attention/attention.h"

#include <algorithm>
#include <cmath>

#include "titan/ops/builtin.h"

namespace titan::ops {

static bool is_f32_4d(const Tensor& t) {
  return t.defined() && t.ndim() == 4 && t.dtype() == DType::f32 && t.is_contiguous();
}

void check_attention(const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK) {
  TITAN_CHECK(is_f32_4d(q_BTHK), "[attention] q: expected a contiguous f32 [B, Tq, H, K] tensor, got ",
              q_BTHK.describe());
  TITAN_CHECK(is_f32_4d(k_BTGK), "[attention] k: expected a contiguous f32 [B, Tk, G, K] tensor, got ",
              k_BTGK.describe());
  const int64_t b = q_BTHK.size(0), h = q_BTHK.size(2), k = q_BTHK.size(3);
  const int64_t tk = k_BTGK.size(1), g = k_BTGK.size(2);
  TITAN_CHECK(k_BTGK.size(0) == b && k_BTGK.size(3) == k && tk > 0,
              "[attention] k: expected f32[", b, ", Tk, G, ", k, "] (Tk > 0) to match q ", q_BTHK.describe(),
              ", got ", k_BTGK.describe(), ". HINT: k needs q's batch and head dim, and at least one key");
  TITAN_CHECK(g > 0 && h % g == 0, "[attention] k: ", g, " kv heads do not divide q's ", h,
              " query heads (q ", q_BTHK.describe(), ", k ", k_BTGK.describe(),
              "). HINT: num_heads must be a multiple of num_kv_heads");
  TITAN_CHECK(is_f32_4d(v_BTGK) && v_BTGK.size(0) == b && v_BTGK.size(1) == tk && v_BTGK.size(2) == g,
              "[attention] v: expected a contiguous f32[", b, ", ", tk, ", ", g, ", Kv] like k ",
              k_BTGK.describe(), ", got ", v_BTGK.describe());
}

int64_t attention_visible_keys(const AttentionArgs& args, int64_t i, int64_t tk) {
  if (args.mask == AttentionMask::full) return tk;
  return std::clamp<int64_t>(args.q_offset + i - args.kv_offset + 1, 0, tk);
}

static void check_args(const AttentionArgs& args) {
  TITAN_CHECK(args.compute == DType::f32 || args.compute == DType::bf16,
              "[attention] args.compute: expected f32 or bf16, got ", dtype_name(args.compute),
              ". HINT: the compute precision is the products' operand type; tensors stay f32");
  TITAN_CHECK(args.q_offset >= 0 && args.kv_offset >= 0, "[attention] args: offsets must be positions >= 0, got q_offset ",
              args.q_offset, " and kv_offset ", args.kv_offset);
}

float attention_scale(const AttentionArgs& args, int64_t head_dim) {
  return args.scale != 0.0f ? args.scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
}

OpTable<AttentionImpl>& attention_table() {
  return builtin_table<AttentionImpl>("attention", register_builtin_attention);
}

static Shape lse_shape(const Tensor& q_BTHK) {
  return {q_BTHK.size(0), q_BTHK.size(2), q_BTHK.size(1)};
}

static Shape out_shape(const Tensor& q_BTHK, const Tensor& v_BTGK) {
  return {q_BTHK.size(0), q_BTHK.size(1), q_BTHK.size(2), v_BTGK.size(3)};
}

void attention_forward(const AttentionArgs& args, const Tensor& q_BTHK, const Tensor& k_BTGK,
                       const Tensor& v_BTGK, Tensor& out_BTHK, AttentionSaved& saved) {
  OpTimer timer("attention_forward");
  check_args(args);
  check_attention(q_BTHK, k_BTGK, v_BTGK);
  const Shape out = out_shape(q_BTHK, v_BTGK);
  TITAN_CHECK(out_BTHK.shape() == out && is_f32_4d(out_BTHK), "[attention] out: expected a contiguous f32",
              shape_str(out), " (q's rows and heads, v's head dim), got ", out_BTHK.describe());
  const Shape lse = lse_shape(q_BTHK);
  if (!saved.lse_BHT.defined() || saved.lse_BHT.shape() != lse ||
      saved.lse_BHT.dtype() != DType::f32 || !saved.lse_BHT.is_contiguous() ||
      saved.lse_BHT.device() != q_BTHK.device()) {
    saved.lse_BHT = Tensor::empty(lse, DType::f32, q_BTHK.device());
  }
  attention_table()
      .select(q_BTHK.device(), q_BTHK, k_BTGK, v_BTGK)
      .forward(args, q_BTHK, k_BTGK, v_BTGK, out_BTHK, saved);
}

void attention_backward(const AttentionArgs& args, const Tensor& dout_BTHK, const Tensor& dlse_BHT,
                        const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK,
                        const Tensor& out_BTHK, const AttentionSaved& saved, Tensor& dq_BTHK,
                        Tensor& dk_BTGK, Tensor& dv_BTGK) {
  OpTimer timer("attention_backward");
  check_args(args);
  check_attention(q_BTHK, k_BTGK, v_BTGK);
  const Shape out = out_shape(q_BTHK, v_BTGK);
  TITAN_CHECK(is_f32_4d(dout_BTHK) && dout_BTHK.shape() == out && is_f32_4d(out_BTHK) &&
                  out_BTHK.shape() == out && is_f32_4d(dq_BTHK) && dq_BTHK.shape() == q_BTHK.shape(),
              "[attention] backward: dout ", dout_BTHK.describe(), " and out ", out_BTHK.describe(),
              " must be contiguous f32", shape_str(out), ", dq ", dq_BTHK.describe(), " like q ",
              q_BTHK.describe());
  TITAN_CHECK(is_f32_4d(dk_BTGK) && dk_BTGK.shape() == k_BTGK.shape() && is_f32_4d(dv_BTGK) &&
                  dv_BTGK.shape() == v_BTGK.shape(),
              "[attention] backward: dk ", dk_BTGK.describe(), " and dv ", dv_BTGK.describe(),
              " must be contiguous and match k ", k_BTGK.describe(), " and v ", v_BTGK.describe());
  const Shape lse = lse_shape(q_BTHK);
  TITAN_CHECK(saved.lse_BHT.defined() && saved.lse_BHT.shape() == lse &&
                  saved.lse_BHT.dtype() == DType::f32 && saved.lse_BHT.is_contiguous(),
              "[attention] backward: saved.lse: expected f32", shape_str(lse), ", got ",
              saved.lse_BHT.defined() ? saved.lse_BHT.describe() : std::string("nothing"),
              ". HINT: pass the AttentionSaved that attention_forward filled");
  TITAN_CHECK(!dlse_BHT.defined() || (dlse_BHT.shape() == lse && dlse_BHT.dtype() == DType::f32 &&
                                      dlse_BHT.is_contiguous()),
              "[attention] backward: dlse: expected nothing or a contiguous f32", shape_str(lse), " like lse, got ",
              dlse_BHT.describe());
  attention_table()
      .select(q_BTHK.device(), q_BTHK, k_BTGK, v_BTGK)
      .backward(args, dout_BTHK, dlse_BHT, q_BTHK, k_BTGK, v_BTGK, out_BTHK, saved, dq_BTHK, dk_BTGK,
                dv_BTGK);
}

}  // namespace titan::ops
