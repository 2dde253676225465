// Contract checks, table and dispatch of moe_load.
#include "titan/ops/moe_load/moe_load.h"

#include <string>

#include "titan/ops/builtin.h"

namespace titan::ops {

static std::string found(const Tensor& t) {
  return t.defined() ? t.describe() + " on " + device_name(t.device()) + (t.is_contiguous() ? "" : ", non-contiguous")
                     : std::string("an undefined tensor");
}

static bool vector_of(const Tensor& t, DType dtype, int64_t e, Device device) {
  return t.defined() && t.ndim() == 1 && t.dtype() == dtype && t.numel() == e && t.is_contiguous() &&
         t.device() == device;
}

static void check_vector(const char* what, const Tensor& t, DType dtype, int64_t e, Device device) {
  TITAN_CHECK(vector_of(t, dtype, e, device), "[moe_load] ", what, ": expected a contiguous ", dtype_name(dtype), " [",
              e, "] (one per expert) on ", device_name(device), ", got ", found(t),
              ". HINT: size the totals by the layer's num_experts");
}

static void check_probs(const Tensor& probs_NE, int64_t e, Device device) {
  TITAN_CHECK(probs_NE.defined() && probs_NE.ndim() == 2 && probs_NE.dtype() == DType::f32 &&
                  probs_NE.size(1) == e && probs_NE.is_contiguous() && probs_NE.device() == device,
              "[moe_load] probs_NE: expected a contiguous f32 [N, ", e, "] on ", device_name(device), ", got ",
              found(probs_NE), ". HINT: pass the router's probs_NE");
}

void check_moe_load(const Tensor& counts_E, const Tensor& probs_NE, const Tensor& load_E, const Tensor& count_sums_E,
                    const Tensor& prob_sums_E) {
  TITAN_CHECK(counts_E.defined() && counts_E.ndim() == 1 && counts_E.dtype() == DType::i64 && counts_E.is_contiguous(),
              "[moe_load] counts_E: expected a contiguous i64 [E], got ", found(counts_E),
              ". HINT: pass the router's expert_counts_E");
  const int64_t e = counts_E.numel();
  const Device device = counts_E.device();
  check_vector("load_E", load_E, DType::i64, e, device);
  TITAN_CHECK(count_sums_E.defined() == prob_sums_E.defined(), "[moe_load] aux totals: count_sums_E is ",
              count_sums_E.defined() ? "defined" : "undefined", " but prob_sums_E is ",
              prob_sums_E.defined() ? "defined" : "undefined",
              ". HINT: pass both (aux-loss balancing) or neither");
  if (!prob_sums_E.defined()) return;
  check_vector("count_sums_E", count_sums_E, DType::f64, e, device);
  check_vector("prob_sums_E", prob_sums_E, DType::f64, e, device);
  check_probs(probs_NE, e, device);
}

void check_moe_load_backward(const Tensor& probs_NE, const Tensor& dprob_sums_E, const Tensor& dlogits_NE) {
  TITAN_CHECK(probs_NE.defined() && probs_NE.ndim() == 2, "[moe_load] probs_NE: expected [N, E], got ",
              found(probs_NE), ". HINT: pass the router's probs_NE");
  const int64_t e = probs_NE.size(1);
  check_probs(probs_NE, e, probs_NE.device());
  check_vector("dprob_sums_E", dprob_sums_E, DType::f64, e, probs_NE.device());
  TITAN_CHECK(dlogits_NE.defined() && dlogits_NE.dtype() == DType::f32 && dlogits_NE.shape() == probs_NE.shape() &&
                  dlogits_NE.is_contiguous() && dlogits_NE.device() == probs_NE.device(),
              "[moe_load] dlogits_NE: expected a contiguous f32 ", shape_str(probs_NE.shape()),
              " (the shape of probs_NE), got ", found(dlogits_NE), ". HINT: allocate it like probs_NE");
}

// Defined with the other registrations in ops/builtin.cpp (the explicit list).
void register_builtin_moe_load(OpTable<MoeLoadImpl>& table);

OpTable<MoeLoadImpl>& moe_load_table() { return builtin_table<MoeLoadImpl>("moe_load", register_builtin_moe_load); }

void moe_load_forward(const Tensor& counts_E, const Tensor& probs_NE, Tensor& load_E, Tensor& count_sums_E,
                      Tensor& prob_sums_E) {
  OpTimer timer("moe_load_forward");
  check_moe_load(counts_E, probs_NE, load_E, count_sums_E, prob_sums_E);
  moe_load_table()
      .select(counts_E.device(), counts_E, probs_NE)
      .forward(counts_E, probs_NE, load_E, count_sums_E, prob_sums_E);
}

void moe_load_backward(const Tensor& probs_NE, const Tensor& dprob_sums_E, Tensor& dlogits_NE) {
  OpTimer timer("moe_load_backward");
  check_moe_load_backward(probs_NE, dprob_sums_E, dlogits_NE);
  // supports sees no counts in backward (only probs matter there).
  moe_load_table().select(probs_NE.device(), Tensor(), probs_NE).backward(probs_NE, dprob_sums_E, dlogits_NE);
}

}  // namespace titan::ops
