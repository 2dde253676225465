// The multi-tensor passes on CPU: the list is cut into fixed work items of at most
// kMultiSumSquaresChunk elements (item k of tensor t), laid out in list order, and the items are
// split over threads. multi_sum_squares writes one partial per item and adds the partials in item
// order on the calling thread (the contract's order, whatever the thread count); first_nonfinite
// marks the items that hold a NaN or an Inf and returns the tensor of the first marked one.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "titan/core/parallel.h"
#include "titan/kernels/cpu/sum_squares.h"
#include "titan/ops/multi_tensor/multi_tensor.h"

namespace titan::ops {

namespace {

// Work items in list order: tensor t's items are [first[t], first[t + 1]).
struct Items {
  std::vector<int64_t> first;
  int64_t count() const { return first.back(); }
};

Items items_of(const std::vector<Tensor>& xs) {
  Items items;
  items.first.assign(xs.size() + 1, 0);
  for (size_t t = 0; t < xs.size(); ++t) {
    const int64_t n = xs[t].numel();
    items.first[t + 1] = items.first[t] + (n + kMultiSumSquaresChunk - 1) / kMultiSumSquaresChunk;
  }
  return items;
}

// Calls fn(item, pointer, length) for the items [begin, end), in order.
template <class Fn>
void for_items(const std::vector<Tensor>& xs, const Items& items, int64_t begin, int64_t end, Fn&& fn) {
  size_t t = 0;
  for (int64_t k = begin; k < end; ++k) {
    while (items.first[t + 1] <= k) ++t;
    const int64_t start = (k - items.first[t]) * kMultiSumSquaresChunk;
    const int64_t len = std::min(kMultiSumSquaresChunk, xs[t].numel() - start);
    fn(k, xs[t].data<float>() + start, len);
  }
}

}  // namespace

static double multi_sum_squares_cpu(const std::vector<Tensor>& xs) {
  const Items items = items_of(xs);
  std::vector<double> partial(static_cast<size_t>(items.count()), 0.0);
  parallel_for(items.count(), 1, [&](int64_t begin, int64_t end) {
    for_items(xs, items, begin, end, [&](int64_t k, const float* x, int64_t len) {
      partial[static_cast<size_t>(k)] = kernels::sum_squares_f32(x, len);
    });
  });
  double total = 0.0;
  for (double s : partial) total += s;  // item order: list order, then chunk order
  return total;
}

static int64_t first_nonfinite_cpu(const std::vector<Tensor>& xs) {
  const Items items = items_of(xs);
  // char, not bool: threads write neighbouring entries (vector<bool> packs them into one word).
  std::vector<char> bad(static_cast<size_t>(items.count()), 0);
  parallel_for(items.count(), 1, [&](int64_t begin, int64_t end) {
    for_items(xs, items, begin, end, [&](int64_t k, const float* x, int64_t len) {
      bad[static_cast<size_t>(k)] = std::any_of(x, x + len, [](float v) { return !std::isfinite(v); });
    });
  });
  const auto hit = std::find(bad.begin(), bad.end(), 1);
  if (hit == bad.end()) return -1;
  const int64_t k = hit - bad.begin();
  // The tensor whose item range holds k (first is non-decreasing; empty tensors have no items).
  return std::upper_bound(items.first.begin(), items.first.end(), k) - items.first.begin() - 1;
}

MultiSumSquaresImpl multi_sum_squares_impl_cpu() {
  return {"multi_sum_squares_cpu", Device::cpu, nullptr, multi_sum_squares_cpu, nullptr};
}
FirstNonfiniteImpl first_nonfinite_impl_cpu() {
  return {"first_nonfinite_cpu", Device::cpu, nullptr, first_nonfinite_cpu, nullptr};
}

}  // namespace titan::ops
