// Scalar references for the multi-tensor passes: plain loops, readable as the contract in
// multi_tensor.h (and, by its exactness argument, the same bits as any kernel).
#include <algorithm>
#include <cmath>

#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/multi_tensor/multi_tensor.h"

namespace titan::ops {
namespace ref {

double multi_sum_squares(const std::vector<const float*>& xs, const std::vector<int64_t>& ns) {
  double total = 0.0;
  for (size_t t = 0; t < xs.size(); ++t) {
    for (int64_t start = 0; start < ns[t]; start += kMultiSumSquaresChunk) {
      const int64_t len = std::min(kMultiSumSquaresChunk, ns[t] - start);
      total += ref::sum_squares(len, xs[t] + start);  // the sum_squares contract per chunk
    }
  }
  return total;
}

int64_t first_nonfinite(const std::vector<const float*>& xs, const std::vector<int64_t>& ns) {
  for (size_t t = 0; t < xs.size(); ++t) {
    for (int64_t i = 0; i < ns[t]; ++i) {
      if (!std::isfinite(xs[t][i])) return static_cast<int64_t>(t);
    }
  }
  return -1;
}

}  // namespace ref

// Raw pointers and element counts of the list (an empty tensor's pointer is never read).
static void unpack(const std::vector<Tensor>& xs, std::vector<const float*>& ptrs, std::vector<int64_t>& ns) {
  for (const Tensor& x : xs) {
    ns.push_back(x.numel());
    ptrs.push_back(x.numel() > 0 ? x.data<float>() : nullptr);
  }
}

static double multi_sum_squares_ref(const std::vector<Tensor>& xs) {
  std::vector<const float*> ptrs;
  std::vector<int64_t> ns;
  unpack(xs, ptrs, ns);
  return ref::multi_sum_squares(ptrs, ns);
}

static int64_t first_nonfinite_ref(const std::vector<Tensor>& xs) {
  std::vector<const float*> ptrs;
  std::vector<int64_t> ns;
  unpack(xs, ptrs, ns);
  return ref::first_nonfinite(ptrs, ns);
}

MultiSumSquaresImpl multi_sum_squares_impl_ref() {
  return {"multi_sum_squares_ref", Device::cpu, nullptr, multi_sum_squares_ref, nullptr};
}
FirstNonfiniteImpl first_nonfinite_impl_ref() {
  return {"first_nonfinite_ref", Device::cpu, nullptr, first_nonfinite_ref, nullptr};
}

}  // namespace titan::ops
