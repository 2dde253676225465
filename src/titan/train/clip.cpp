#include "titan/train/clip.h"

#include <cmath>
#include <vector>

#include "titan/ops/elementwise/elementwise.h"
#include "titan/ops/multi_tensor/multi_tensor.h"

namespace titan::train {

// The gradients of `params`, in list order (the ops take tensors).
static std::vector<Tensor> grads_of(const nn::ParameterList& params) {
  std::vector<Tensor> grads;
  grads.reserve(params.size());
  for (const nn::Parameter* p : params) grads.push_back(p->grad);
  return grads;
}

double grad_norm(const nn::ParameterList& params, const SquaresReducer& reduce) {
  // Fixed 64K-element chunks summed in list order (ops/multi_tensor/multi_tensor.h): the same
  // bits for any thread count.
  double total = ops::multi_sum_squares(grads_of(params));
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
  const int64_t t = ops::first_nonfinite(grads_of(params));
  return t < 0 ? std::string() : params[static_cast<size_t>(t)]->fqn;
}

}  // namespace titan::train
