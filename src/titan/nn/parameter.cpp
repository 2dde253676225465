#include "titan/nn/parameter.h"

#include "titan/ops/elementwise/elementwise.h"

namespace titan::nn {

void add_inplace(Tensor& a, const Tensor& b) { ops::accumulate(a, b); }

}  // namespace titan::nn
