// Contract checks, tables and dispatch of accumulate, scale and sum_squares.
#include "titan/ops/elementwise/elementwise.h"

#include <string>

#include "titan/ops/builtin.h"

namespace titan::ops {

// "f32[3, 5] on cpu", with ", non-contiguous" when it is: what a failed check found.
static std::string found(const Tensor& t) {
  return t.describe() + " on " + device_name(t.device()) + (t.is_contiguous() ? "" : ", non-contiguous");
}

static bool flat_f32(const Tensor& t) { return t.defined() && t.dtype() == DType::f32 && t.is_contiguous(); }

static void check_flat_f32(const char* op, const char* what, const Tensor& t) {
  TITAN_CHECK(flat_f32(t), "[", op, "] ", what, ": expected a contiguous f32 tensor, got ",
              t.defined() ? found(t) : std::string("an undefined tensor"),
              ". HINT: call contiguous() / to(DType::f32) first, or allocate it as f32");
}

void check_accumulate(const Tensor& a, const Tensor& b) {
  check_flat_f32("accumulate", "a", a);
  check_flat_f32("accumulate", "b", b);
  TITAN_CHECK(b.numel() == a.numel() && b.device() == a.device(), "[accumulate] b: expected ",
              a.numel(), " f32 elements on ", device_name(a.device()), " (those of a ", found(a),
              "), got ", found(b), ". HINT: a += b needs two buffers of the same size on one device");
}

void check_scale(const Tensor& a) { check_flat_f32("scale", "a", a); }

void check_sum_squares(const Tensor& x) { check_flat_f32("sum_squares", "x", x); }

void check_cast(const Tensor& src, const Tensor& dst) {
  TITAN_CHECK(src.defined() && dst.defined() && src.is_contiguous() && dst.is_contiguous() &&
                  src.numel() == dst.numel() && src.device() == dst.device() &&
                  ((src.dtype() == DType::f32 && dst.dtype() == DType::bf16) ||
                   (src.dtype() == DType::bf16 && dst.dtype() == DType::f32)),
              "[cast] expected contiguous src and dst of the same numel on one device, one f32 and the other bf16; got src ",
              src.defined() ? found(src) : std::string("undefined"), ", dst ",
              dst.defined() ? found(dst) : std::string("undefined"));
}

// Defined with the other registrations in ops/builtin.cpp (the explicit list).
void register_builtin_accumulate(OpTable<AccumulateImpl>& table);
void register_builtin_scale(OpTable<ScaleImpl>& table);
void register_builtin_sum_squares(OpTable<SumSquaresImpl>& table);
void register_builtin_cast(OpTable<CastImpl>& table);

OpTable<AccumulateImpl>& accumulate_table() {
  return builtin_table<AccumulateImpl>("accumulate", register_builtin_accumulate);
}
OpTable<ScaleImpl>& scale_table() { return builtin_table<ScaleImpl>("scale", register_builtin_scale); }
OpTable<CastImpl>& cast_table() { return builtin_table<CastImpl>("cast", register_builtin_cast); }
OpTable<SumSquaresImpl>& sum_squares_table() {
  return builtin_table<SumSquaresImpl>("sum_squares", register_builtin_sum_squares);
}

void accumulate(Tensor& a, const Tensor& b) {
  OpTimer timer("accumulate_forward");
  check_accumulate(a, b);
  accumulate_table().select(a.device(), a, b).forward(a, b);
}

void scale(Tensor& a, float s) {
  OpTimer timer("scale_forward");
  check_scale(a);
  scale_table().select(a.device(), a).forward(a, s);
}

double sum_squares(const Tensor& x) {
  OpTimer timer("sum_squares_forward");
  check_sum_squares(x);
  return sum_squares_table().select(x.device(), x).forward(x);
}

void cast(const Tensor& src, Tensor& dst) {
  OpTimer timer("cast_forward");
  check_cast(src, dst);
  cast_table().select(src.device(), src, dst).forward(src, dst);
}

Tensor cast_to(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype, x.device());
  cast(x.is_contiguous() ? x : x.contiguous(), out);
  return out;
}

}  // namespace titan::ops
