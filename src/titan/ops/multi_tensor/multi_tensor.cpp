// Contract checks, tables and dispatch of multi_sum_squares and first_nonfinite.
#include "titan/ops/multi_tensor/multi_tensor.h"

#include <string>

#include "titan/ops/builtin.h"

namespace titan::ops {

void check_multi_tensor(const char* op, const std::vector<Tensor>& xs) {
  for (size_t t = 0; t < xs.size(); ++t) {
    const Tensor& x = xs[t];
    TITAN_CHECK(x.defined() && x.dtype() == DType::f32 && x.is_contiguous(), "[", op, "] xs[", t,
                "]: expected a contiguous f32 tensor, got ",
                x.defined() ? x.describe() + (x.is_contiguous() ? "" : ", non-contiguous")
                            : std::string("an undefined tensor"),
                ". HINT: pass gradients as allocated (contiguous f32), or call contiguous() first");
    TITAN_CHECK(x.device() == xs.front().device(), "[", op, "] xs[", t, "]: expected a tensor on ",
                device_name(xs.front().device()), " like xs[0], got one on ", device_name(x.device()),
                ". HINT: one call covers tensors of one device");
  }
}

OpTable<MultiSumSquaresImpl>& multi_sum_squares_table() {
  return builtin_table<MultiSumSquaresImpl>("multi_sum_squares", register_builtin_multi_sum_squares);
}
OpTable<FirstNonfiniteImpl>& first_nonfinite_table() {
  return builtin_table<FirstNonfiniteImpl>("first_nonfinite", register_builtin_first_nonfinite);
}

// The list's device (cpu for an empty list: there is nothing to read).
static Device device_of(const std::vector<Tensor>& xs) { return xs.empty() ? Device::cpu : xs.front().device(); }

double multi_sum_squares(const std::vector<Tensor>& xs) {
  OpTimer timer("multi_sum_squares_forward");
  check_multi_tensor("multi_sum_squares", xs);
  return multi_sum_squares_table().select(device_of(xs), xs).forward(xs);
}

int64_t first_nonfinite(const std::vector<Tensor>& xs) {
  OpTimer timer("first_nonfinite_forward");
  check_multi_tensor("first_nonfinite", xs);
  return first_nonfinite_table().select(device_of(xs), xs).forward(xs);
}

}  // namespace titan::ops
