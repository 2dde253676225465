// Contract checks and dispatch.
#include "titan/ops/attention/attention.h"

#include <cmath>

#include "titan/ops/builtin.h"

namespace titan::ops {

static bool is_f32_4d(const Tensor& t) {
  return t.defined() && t.ndim() == 4 && t.dtype() == DType::f32 && t.is_contiguous();
}

void check_attention(const Tensor& q_BTHK, const Tensor& k_BTGK, const Tensor& v_BTGK) {
  TITAN_CHECK(is_f32_4d(q_BTHK), "[attention] q: expected a contiguous f32 [B, T, H, K] tensor, got ",
              q_BTHK.describe());
  TITAN_CHECK(is_f32_4d(k_BTGK), "[attention] k: expected a contiguous f32 [B, T, G, K] tensor, got ",
              k_BTGK.describe());
  const int64_t b = q_BTHK.size(0), t = q_BTHK.size(1), h = q_BTHK.size(2), k = q_BTHK.size(3);
  const int64_t g = k_BTGK.size(2);
  TITAN_CHECK(k_BTGK.size(0) == b && k_BTGK.size(1) == t && k_BTGK.size(3) == k,
              "[attention] k: expected f32[", b, ", ", t, ", G, ", k, "] to match q ",
              q_BTHK.describe(), ", got ", k_BTGK.describe(),
              ". HINT: k needs q's batch, sequence length and head dim");
  TITAN_CHECK(g > 0 && h % g == 0, "[attention] k: ", g, " kv heads do not divide q's ", h,
              " query heads (q ", q_BTHK.describe(), ", k ", k_BTGK.describe(),
              "). HINT: num_heads must be a multiple of num_kv_heads");
  TITAN_CHECK(v_BTGK.shape() == k_BTGK.shape() && is_f32_4d(v_BTGK),
              "[attention] v: expected a contiguous f32", shape_str(k_BTGK.shape()),
              " like k, got ", v_BTGK.describe());
}

static void check_compute(const AttentionArgs& args) {
  TITAN_CHECK(args.compute == DType::f32 || args.compute == DType::bf16,
              "[attention] args.compute: expected f32 or bf16, got ", dtype_name(args.compute),
              ". HINT: the compute precision is the products' operand type; tensors stay f32");
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

void attention_forward(const AttentionArgs& args, const Tensor& q_BTHK, const Tensor& k_BTGK,
                       const Tensor& v_BTGK, Tensor& out_BTHK, AttentionSaved& saved) {
  OpTimer timer("attention_forward");
  check_compute(args);
  check_attention(q_BTHK, k_BTGK, v_BTGK);
  TITAN_CHECK(out_BTHK.shape() == q_BTHK.shape() && is_f32_4d(out_BTHK),
              "[attention] out: expected a contiguous f32", shape_str(q_BTHK.shape()),
              " like q, got ", out_BTHK.describe());
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

void attention_backward(const AttentionArgs& args, const Tensor& dout_BTHK, const Tensor& q_BTHK,
                        const Tensor& k_BTGK, const Tensor& v_BTGK, const Tensor& out_BTHK,
                        const AttentionSaved& saved, Tensor& dq_BTHK, Tensor& dk_BTGK,
                        Tensor& dv_BTGK) {
  OpTimer timer("attention_backward");
  check_compute(args);
  check_attention(q_BTHK, k_BTGK, v_BTGK);
  TITAN_CHECK(is_f32_4d(dout_BTHK) && dout_BTHK.shape() == q_BTHK.shape() &&
                  is_f32_4d(out_BTHK) && out_BTHK.shape() == q_BTHK.shape() &&
                  is_f32_4d(dq_BTHK) && dq_BTHK.shape() == q_BTHK.shape(),
              "[attention] backward: dout ", dout_BTHK.describe(), ", out ", out_BTHK.describe(),
              " and dq ", dq_BTHK.describe(), " must be contiguous and match q ", q_BTHK.describe());
  TITAN_CHECK(is_f32_4d(dk_BTGK) && dk_BTGK.shape() == k_BTGK.shape() && is_f32_4d(dv_BTGK) &&
                  dv_BTGK.shape() == k_BTGK.shape(),
              "[attention] backward: dk ", dk_BTGK.describe(), " and dv ", dv_BTGK.describe(),
              " must be contiguous and match k ", k_BTGK.describe());
  TITAN_CHECK(saved.lse_BHT.defined() && saved.lse_BHT.shape() == lse_shape(q_BTHK) &&
                  saved.lse_BHT.dtype() == DType::f32 && saved.lse_BHT.is_contiguous(),
              "[attention] backward: saved.lse: expected f32", shape_str(lse_shape(q_BTHK)),
              ", got ", saved.lse_BHT.defined() ? saved.lse_BHT.describe() : std::string("nothing"),
              ". HINT: pass the AttentionSaved that attention_forward filled");
  attention_table()
      .select(q_BTHK.device(), q_BTHK, k_BTGK, v_BTGK)
      .backward(args, dout_BTHK, q_BTHK, k_BTGK, v_BTGK, out_BTHK, saved, dq_BTHK, dk_BTGK,
                dv_BTGK);
}

}  // namespace titan::ops
