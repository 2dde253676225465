#include "titan/train/clip.h"

#include <cmath>
#include <vector>

#include "titan/core/parallel.h"
#include "titan/ops/elementwise/elementwise.h"

namespace titan::train {

// Elements per partial sum. Fixed, so the summation tree does not depend on the thread count.
// Each chunk is one ops::sum_squares call (fp64, 8 accumulators in the order elementwise.h fixes).
constexpr int64_t kNormChunk = 1 << 16;

double grad_norm(const nn::ParameterList& params, const SquaresReducer& reduce) {
  // One partial per (parameter, chunk), laid out in list order.
  std::vector<int64_t> first_chunk(params.size() + 1, 0);
  for (size_t p = 0; p < params.size(); ++p) {
    const int64_t n = params[p]->grad.numel();
    first_chunk[p + 1] = first_chunk[p] + (n + kNormChunk - 1) / kNormChunk;
  }
  const int64_t num_chunks = first_chunk.back();
  std::vector<double> partial(static_cast<size_t>(num_chunks), 0.0);
  parallel_for(num_chunks, 1, [&](int64_t begin, int64_t end) {
    size_t p = 0;
    for (int64_t c = begin; c < end; ++c) {
      while (first_chunk[p + 1] <= c) ++p;
      const Tensor& g = params[p]->grad;
      const int64_t start = (c - first_chunk[p]) * kNormChunk;
      const int64_t len = std::min(kNormChunk, g.numel() - start);
      partial[static_cast<size_t>(c)] = ops::sum_squares(g.reshape({g.numel()}).narrow(0, start, len));
    }
  });
  double total = 0.0;
  for (double s : partial) total += s;
  if (reduce) total = reduce(total);
  return std::sqrt(total);
}

double clip_grad_norm(const nn::ParameterList& params, double max_norm, const SquaresReducer& reduce,
                      const nn::ParameterList* counted) {
  const double norm = grad_norm(counted != nullptr ? *counted : params, reduce);
  if (max_norm <= 0.0 || !std::isfinite(norm)) return norm;
  // torch: clip_coef = max_norm / (total_norm + 1e-6), clamped to 1, applied in f32. Note the
  // 1e-6: a norm just below max_norm is still scaled (by a factor just below 1), as in torch.
  const double clip_coef = max_norm / (norm + 1e-6);
  if (clip_coef >= 1.0) return norm;
  const float coef = static_cast<float>(clip_coef);
  for (nn::Parameter* p : params) ops::scale(p->grad, coef);
  return norm;
}

std::string first_nonfinite_grad(const nn::ParameterList& params) {
  for (const nn::Parameter* p : params) {
    const float* g = p->grad.data<float>();
    const int64_t n = p->grad.numel();
    // Sum-free scan; isfinite per element (the fast path after a finite norm never runs this).
    for (int64_t i = 0; i < n; ++i) {
      if (!std::isfinite(g[i])) return p->fqn;
    }
  }
  return "";
}

}  // namespace titan::train
