// Table construction, contract checks and dispatch.
#include "titan/ops/rope/rope.h"

#include <algorithm>
#include <cmath>

#include "titan/core/parallel.h"
#include "titan/ops/builtin.h"

namespace titan::ops {

RopeTables rope_tables(const RopeArgs& args, const Tensor& positions_N, int64_t head_dim) {
  TITAN_CHECK(head_dim > 0 && head_dim % 2 == 0, "[rope] head_dim: expected a positive even number, got ",
              head_dim, ". HINT: rotate-half pairs lane i with lane i + head_dim/2");
  TITAN_CHECK(std::isfinite(args.theta) && args.theta > 0.0f, "[rope] theta: expected a positive ",
              "finite base, got ", args.theta, ". HINT: Qwen3 uses rope_theta = 1e6");
  TITAN_CHECK(positions_N.dtype() == DType::i64 && positions_N.is_contiguous(),
              "[rope] positions: expected a contiguous i64 tensor, got ", positions_N.describe());
  const int64_t n = positions_N.numel(), k2 = head_dim / 2;
  const Device device = positions_N.device();
  RopeTables tables{Tensor::empty({n, k2}, DType::f32, device), Tensor::empty({n, k2}, DType::f32, device), head_dim};
  if (positions_N.is_meta()) return tables;  // the tables' shapes; their values need the positions
  const int64_t* pos = positions_N.data<int64_t>();
  float* cp = tables.cos_NK2.data<float>();
  float* sp = tables.sin_NK2.data<float>();
  // The forward's length, as HF's dynamic_rope_update reads it: max(position_ids) + 1.
  int64_t seq_len = 0;
  for (int64_t t = 0; t < n; ++t) seq_len = std::max(seq_len, pos[t] + 1);
  const RopeFrequencies freq = rope_frequencies(static_cast<double>(args.theta), head_dim, args.scaling, seq_len);
  // Rows are independent: the reference math on row slices, split over threads.
  parallel_for(n, 64, [&](int64_t b, int64_t e) {
    ref::rope_tables(freq.inv_freq.data(), freq.attention_factor, e - b, head_dim, pos + b, cp + b * k2, sp + b * k2);
  });
  return tables;
}

void check_rope(const RopeTables& tables, const Tensor& x_NHK) {
  const int64_t k = tables.head_dim;
  TITAN_CHECK(k > 0 && tables.cos_NK2.defined() && tables.sin_NK2.defined() &&
                  tables.cos_NK2.ndim() == 2 && tables.cos_NK2.size(1) == k / 2 &&
                  tables.sin_NK2.shape() == tables.cos_NK2.shape() &&
                  tables.cos_NK2.dtype() == DType::f32 && tables.sin_NK2.dtype() == DType::f32,
              "[rope] tables: expected f32 cos/sin [N, head_dim/2] for head_dim ", k, ", got cos ",
              tables.cos_NK2.defined() ? tables.cos_NK2.describe() : "undefined",
              ". HINT: build them with rope_tables()");
  TITAN_CHECK(x_NHK.dtype() == DType::f32 && x_NHK.is_contiguous() && x_NHK.ndim() >= 3 &&
                  x_NHK.size(-2) > 0 && x_NHK.size(-1) >= k,
              "[rope] x: expected a contiguous f32 [..., H, K] tensor (ndim >= 3, K >= the rotated head_dim ", k,
              "), got ", x_NHK.describe(), ". HINT: view q/k as [B, T, H, head_dim] before applying RoPE");
  const int64_t h = x_NHK.size(-2), rows = x_NHK.numel() / (h * x_NHK.size(-1));
  TITAN_CHECK(rows == tables.cos_NK2.size(0), "[rope] x: ", x_NHK.describe(), " has ", rows,
              " rows of ", h, " heads x ", x_NHK.size(-1), " lanes, but the tables have ", tables.cos_NK2.size(0),
              " rows (one per position). HINT: build the tables from the positions of the same B*T "
              "tokens as x");
}

OpTable<RopeImpl>& rope_table() {
  return builtin_table<RopeImpl>("rope", register_builtin_rope);
}

// The output must be shaped like the input; it may be the input itself.
static void check_out(const char* what, const Tensor& out, const Tensor& in) {
  TITAN_CHECK(out.dtype() == DType::f32 && out.is_contiguous() && out.shape() == in.shape(),
              "[rope] ", what, ": expected contiguous f32", shape_str(in.shape()), ", got ",
              out.describe());
}

void rope_forward(const RopeTables& tables, const Tensor& x_NHK, Tensor& y_NHK) {
  OpTimer timer("rope_forward");
  check_rope(tables, x_NHK);
  check_out("y", y_NHK, x_NHK);
  rope_table().select(x_NHK.device(), tables, x_NHK).forward(tables, x_NHK, y_NHK);
}

void rope_backward(const RopeTables& tables, const Tensor& dy_NHK, Tensor& dx_NHK) {
  OpTimer timer("rope_backward");
  check_rope(tables, dy_NHK);
  check_out("dx", dx_NHK, dy_NHK);
  rope_table().select(dy_NHK.device(), tables, dy_NHK).backward(tables, dy_NHK, dx_NHK);
}

}  // namespace titan::ops
