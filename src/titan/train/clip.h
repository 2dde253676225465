// Gradient norm and clipping over a parameter list (torch.nn.utils.clip_grad_norm_ with
// norm_type=2, error_if_nonfinite=False, foreach=False).
//   total_norm = sqrt(sum over all parameters and elements of grad^2)     (accumulated in fp64)
//   clip_coef  = min(max_norm / (total_norm + 1e-6), 1)                  (grads *= clip_coef)
// Determinism: each gradient is cut into fixed chunks of ops::kMultiSumSquaresChunk elements
// whose partial sums are combined in list and chunk order (ops::multi_sum_squares), so the norm
// is the same bits for any thread count and any schedule.
#pragma once

#include <functional>
#include <string>

#include "titan/nn/parameter.h"

namespace titan::train {

// Sums a partial sum of squares over the ranks that hold the other parts of the gradient (FSDP
// shards); null: the gradient is whole here.
using SquaresReducer = std::function<double(double)>;

// Global L2 norm of all gradients (with `reduce`: of every rank's pieces together). NaN/Inf when
// any gradient element is non-finite.
double grad_norm(const nn::ParameterList& params, const SquaresReducer& reduce = nullptr);

// Returns the norm before clipping. When max_norm > 0 and max_norm / (norm + 1e-6) < 1 (i.e.
// norm > max_norm - 1e-6), scales every grad by that factor. max_norm <= 0 disables clipping.
// A non-finite norm is returned without touching the grads (the caller stops the run; see
// first_nonfinite_grad).
// `counted` (default: params): the parameters whose squares make up the norm, when some of
// params are copies of another rank's (tensor-parallel replicated norms count on one rank only).
double clip_grad_norm(const nn::ParameterList& params, double max_norm, const SquaresReducer& reduce = nullptr,
                      const nn::ParameterList* counted = nullptr);

// FQN of the first parameter (in list order) whose grad holds a NaN or Inf; "" if none.
std::string first_nonfinite_grad(const nn::ParameterList& params);

}  // namespace titan::train
