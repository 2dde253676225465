// Contract checks and dispatch.
#include "titan/ops/kv_attention/kv_attention.h"

#include "titan/ops/builtin.h"

namespace titan::ops {

static bool is_f32_4d(const Tensor& t) {
  return t.defined() && t.ndim() == 4 && t.dtype() == DType::f32 && t.is_contiguous();
}

void check_kv_attention(const Tensor& q_BSHK, const Tensor& k_BCGK, const Tensor& v_BCGK, const Tensor& begin_B,
                        int64_t end) {
  TITAN_CHECK(is_f32_4d(q_BSHK), "[kv_attention] q: expected a contiguous f32 [B, S, H, K] tensor, got ",
              q_BSHK.describe());
  TITAN_CHECK(is_f32_4d(k_BCGK), "[kv_attention] k cache: expected a contiguous f32 [B, C, G, K] tensor, got ",
              k_BCGK.describe());
  const int64_t b = q_BSHK.size(0), s = q_BSHK.size(1), h = q_BSHK.size(2), k = q_BSHK.size(3);
  const int64_t c = k_BCGK.size(1), g = k_BCGK.size(2);
  TITAN_CHECK(k_BCGK.size(0) == b && k_BCGK.size(3) == k, "[kv_attention] k cache: expected f32[", b, ", C, G, ", k,
              "] to match q ", q_BSHK.describe(), ", got ", k_BCGK.describe());
  TITAN_CHECK(g > 0 && h % g == 0, "[kv_attention] k cache: ", g, " kv heads do not divide q's ", h,
              " query heads. HINT: num_heads must be a multiple of num_kv_heads");
  TITAN_CHECK(v_BCGK.shape() == k_BCGK.shape() && is_f32_4d(v_BCGK), "[kv_attention] v cache: expected a contiguous f32",
              shape_str(k_BCGK.shape()), " like the k cache, got ", v_BCGK.describe());
  TITAN_CHECK(end >= s && end <= c, "[kv_attention] end = ", end, ": expected S (", s, ") <= end <= C (", c,
              "). HINT: write the new tokens' keys into the cache first; grow the cache for longer sequences");
  TITAN_CHECK(begin_B.defined() && begin_B.dtype() == DType::i64 && begin_B.ndim() == 1 && begin_B.size(0) == b &&
                  begin_B.is_contiguous(),
              "[kv_attention] begin: expected a contiguous i64 [", b, "] tensor, got ",
              begin_B.defined() ? begin_B.describe() : std::string("nothing"));
}

OpTable<KvAttentionImpl>& kv_attention_table() {
  return builtin_table<KvAttentionImpl>("kv_attention", register_builtin_kv_attention);
}

void kv_attention_forward(const KvAttentionArgs& args, const Tensor& q_BSHK, const Tensor& k_BCGK,
                          const Tensor& v_BCGK, const Tensor& begin_B, int64_t end, Tensor& out_BSHK) {
  OpTimer timer("kv_attention_forward");
  check_kv_attention(q_BSHK, k_BCGK, v_BCGK, begin_B, end);
  TITAN_CHECK(out_BSHK.shape() == q_BSHK.shape() && is_f32_4d(out_BSHK), "[kv_attention] out: expected a contiguous f32",
              shape_str(q_BSHK.shape()), " like q, got ", out_BSHK.describe());
  kv_attention_table()
      .select(q_BSHK.device(), q_BSHK, k_BCGK, v_BCGK)
      .forward(args, q_BSHK, k_BCGK, v_BCGK, begin_B, end, out_BSHK);
}

}  // namespace titan::ops
