// Scalar reference for the attention merge: one output row at a time, accumulation in double.
#include <cmath>
#include <limits>
#include <vector>

#include "titan/ops/attention_merge/attention_merge.h"

namespace titan::ops {
namespace ref {

// Output row n = (b, t, h) of [B, T, H, Kv] -> its lse index in [B, H, T].
static int64_t lse_index(const MergeSizes& n, int64_t row) {
  const int64_t h = row % n.h, bt = row / n.h;
  return (bt / n.t * n.h + h) * n.t + bt % n.t;
}

// The merged lse of one row from the parts' lse values (-inf when every part is -inf).
template <class T>
static double merged_lse(std::span<const T* const> lses, int64_t li) {
  double m = -std::numeric_limits<double>::infinity();
  for (const T* l : lses) m = std::max(m, static_cast<double>(l[li]));
  if (m == -std::numeric_limits<double>::infinity()) return m;
  double sum = 0.0;
  for (const T* l : lses) sum += std::exp(static_cast<double>(l[li]) - m);
  return m + std::log(sum);
}

template <class T>
void attention_merge_forward(const MergeSizes& n, std::span<const T* const> outs, std::span<const T* const> lses,
                             T* out, T* lse) {
  for (int64_t row = 0; row < n.b * n.t * n.h; ++row) {
    const int64_t li = lse_index(n, row);
    const double l = merged_lse(lses, li);
    lse[li] = static_cast<T>(l);
    for (int64_t c = 0; c < n.kv; ++c) {
      double acc = 0.0;
      for (size_t r = 0; r < outs.size() && std::isfinite(l); ++r) {
        acc += std::exp(static_cast<double>(lses[r][li]) - l) * outs[r][row * n.kv + c];
      }
      out[row * n.kv + c] = static_cast<T>(acc);
    }
  }
}

template <class T>
void attention_merge_backward(const MergeSizes& n, const T* dout, const T* dlse, const T* out, const T* lse,
                              std::span<const T* const> outs, std::span<const T* const> lses,
                              std::span<T* const> douts, std::span<T* const> dlses) {
  for (int64_t row = 0; row < n.b * n.t * n.h; ++row) {
    const int64_t li = lse_index(n, row);
    const double l = lse[li];
    for (size_t r = 0; r < outs.size(); ++r) {
      const double w = std::isfinite(l) ? std::exp(static_cast<double>(lses[r][li]) - l) : 0.0;
      double dot = 0.0;  // dout . (out_r - out)
      for (int64_t c = 0; c < n.kv; ++c) {
        const int64_t i = row * n.kv + c;
        dot += static_cast<double>(dout[i]) * (static_cast<double>(outs[r][i]) - out[i]);
        douts[r][i] = static_cast<T>(w * dout[i]);
      }
      dlses[r][li] = static_cast<T>(w * (dot + (dlse != nullptr ? static_cast<double>(dlse[li]) : 0.0)));
    }
  }
}

template void attention_merge_forward<float>(const MergeSizes&, std::span<const float* const>,
                                             std::span<const float* const>, float*, float*);
template void attention_merge_forward<double>(const MergeSizes&, std::span<const double* const>,
                                              std::span<const double* const>, double*, double*);
template void attention_merge_backward<float>(const MergeSizes&, const float*, const float*, const float*,
                                              const float*, std::span<const float* const>,
                                              std::span<const float* const>, std::span<float* const>,
                                              std::span<float* const>);
template void attention_merge_backward<double>(const MergeSizes&, const double*, const double*, const double*,
                                               const double*, std::span<const double* const>,
                                               std::span<const double* const>, std::span<double* const>,
                                               std::span<double* const>);

}  // namespace ref

namespace {

ref::MergeSizes sizes(std::span<const Tensor> outs) {
  const Tensor& o = outs[0];
  return {o.size(0), o.size(1), o.size(2), o.size(3)};
}

template <class P, class Ts>
std::vector<P> pointers(Ts& tensors) {
  std::vector<P> p;
  for (auto& t : tensors) p.push_back(t.template data<float>());
  return p;
}

void forward_ref(std::span<const Tensor> outs, std::span<const Tensor> lses, Tensor& out, Tensor& lse) {
  const std::vector<const float*> o = pointers<const float*>(outs), l = pointers<const float*>(lses);
  ref::attention_merge_forward<float>(sizes(outs), o, l, out.data<float>(), lse.data<float>());
}

void backward_ref(const Tensor& dout, const Tensor& dlse, const Tensor& out, const Tensor& lse,
                  std::span<const Tensor> outs, std::span<const Tensor> lses, std::span<Tensor> douts,
                  std::span<Tensor> dlses) {
  const std::vector<const float*> o = pointers<const float*>(outs), l = pointers<const float*>(lses);
  const std::vector<float*> d_o = pointers<float*>(douts), d_l = pointers<float*>(dlses);
  ref::attention_merge_backward<float>(sizes(outs), dout.data<float>(), dlse.defined() ? dlse.data<float>() : nullptr,
                                       out.data<float>(), lse.data<float>(), o, l, d_o, d_l);
}

}  // namespace

AttentionMergeImpl attention_merge_impl_ref() {
  return {"attention_merge_ref", Device::cpu, nullptr, forward_ref, backward_ref};
}

}  // namespace titan::ops
